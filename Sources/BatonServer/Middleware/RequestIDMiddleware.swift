import BatonJSON
import HTTPTypes
import Hummingbird
import Logging
import Synchronization

/// Gives every request an id, echoed in `X-Request-Id` and attached to every log line.
/// A caller's id is kept only if it is short and plain (so it cannot forge log lines).
public struct RequestIDMiddleware: RouterMiddleware {
    public typealias Context = BatonRequestContext

    public init() {}

    public func handle(
        _ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response
    ) async throws -> Response {
        var context = context
        let id = request.headers.value(.requestID).flatMap(Self.acceptable) ?? Self.generate()
        context.requestID = id
        context.logger[metadataKey: "request_id"] = .string(id)
        context.logger[metadataKey: "hb.request.id"] = nil
        var response = try await next(request, context)
        response.headers[.requestID] = id
        return response
    }

    static func acceptable(_ id: String) -> String? {
        guard (1...128).contains(id.utf8.count),
            id.utf8.allSatisfy({ byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
            })
        else { return nil }
        return id
    }

    /// A random per-process prefix and a counter: unique across replicas and restarts without
    /// a system call per request (ids identify requests; they are not secrets).
    static func generate() -> String {
        let sequence = counter.wrappingAdd(1, ordering: .relaxed).oldValue
        // 32 hex digits in one string (every request makes one): the two numbers' bytes, big-endian.
        return withUnsafeBytes(of: (prefix.bigEndian, sequence.bigEndian)) { Hex.encode($0) }
    }

    private static let prefix: UInt64 = {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }()
    private static let counter = Atomic<UInt64>(0)
}

extension HTTPField.Name {
    public static let requestID = Self("X-Request-Id")!
    public static let idempotentReplay = Self("Idempotent-Replay")!
    public static let idempotencyKey = Self("Idempotency-Key")!
}
