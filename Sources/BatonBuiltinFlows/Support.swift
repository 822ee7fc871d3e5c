import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import Foundation

extension FlowInvocation {
    /// A UUID argument; anything else is "not found" (ids come from links and payloads).
    func uuid(_ name: String) throws -> UUID {
        guard let text = optionalString(name), let id = UUID(uuidString: text) else {
            throw FlowCallError.notFound("no such \(name)")
        }
        return id
    }

    /// The signed-in user's subject, or 401 for screens that show a user's own data.
    func user() throws -> String {
        guard subject.kind == .user else { throw FlowCallError.unauthenticated("sign in to see this") }
        return subject.description
    }
}

extension UUID {
    /// The canonical lowercase form (8-4-4-4-12 hex digits), written directly: loaders give
    /// every row's id this way, and `uuidString.lowercased()` builds two strings per id.
    var lowercased: String {
        withUnsafeBytes(of: uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { output in
                let digits: StaticString = "0123456789abcdef"
                var index = 0
                for (position, byte) in bytes.enumerated() {
                    if position == 4 || position == 6 || position == 8 || position == 10 {
                        output[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    output[index] = digits.utf8Start[Int(byte >> 4)]
                    output[index + 1] = digits.utf8Start[Int(byte & 0x0F)]
                    index += 2
                }
                return index
            }
        }
    }
}

/// `m:ss` for a track length (`String(format:)` goes through Foundation's formatter).
func formatDuration(_ seconds: Int) -> String {
    let remainder = seconds % 60
    return "\(seconds / 60):" + ((0..<10).contains(remainder) ? "0\(remainder)" : "\(remainder)")
}
