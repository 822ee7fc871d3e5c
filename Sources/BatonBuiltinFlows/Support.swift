import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import Foundation

extension FlowInvocation {
    /// A UUID argument; anything else is "not found" (ids come from links and payloads).
    func uuid(_ name: String) throws -> UUID {
        guard let text = optionalString(name), let id = UUID(canonical: text) else {
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

/// `m:ss` for a track length (`String(format:)` goes through Foundation's formatter).
func formatDuration(_ seconds: Int) -> String {
    let remainder = seconds % 60
    return String(seconds / 60) + ((0..<10).contains(remainder) ? ":0" : ":") + String(remainder)
}
