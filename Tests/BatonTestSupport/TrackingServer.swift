import BatonJSON
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// A real HTTP server standing in for the tracking API in tests (a small Hummingbird app on a
/// free loopback port). Tests program how it misbehaves and read what it received:
///
/// - `GET /v1/parcels/:code` answers the parcel, 404 for codes it does not know;
/// - `POST /v1/parcels/:code/redirect` applies a redirect once per `Idempotency-Key` (a repeat
///   of a key answers the first reply again), 409 when the parcel already goes elsewhere.
public final class TrackingServer: Sendable {
    /// How the server behaves; change it at any time.
    public struct Behaviour: Sendable {
        /// Every answer waits this long first.
        public var delay: Duration = .zero
        /// The next this-many requests answer 503.
        public var failNext = 0
        /// Every request answers with this status (500, 404, 409…) instead.
        public var forceStatus: Int?
        /// The next this-many redirects are applied, then the connection is dropped before the
        /// response body is sent.
        public var dropAfterApplying = 0
        /// Redirects are applied at once, and answered only after this long.
        public var delayAfterApplying: Duration = .zero
        /// A parcel's answer sends its head and the body's first bytes at once, the rest after
        /// this long (a service that stalls mid-answer).
        public var stallBody: Duration = .zero
        /// A parcel's answer is these bytes instead (as JSON, status 200).
        public var parcelBody: [UInt8]?
        public init() {}
    }

    public let port: Int
    /// What the handlers and the test share.
    private final class Shared: Sendable {
        let behaviour = Mutex(Behaviour())
        let stopping = Mutex(false)
        /// Requests being handled now, and the most at once.
        let inFlight = Mutex<(now: Int, most: Int)>((0, 0))

        /// Sleeps, but wakes when the server stops (a handler cancelled mid-sleep would bring
        /// the process down in NIO).
        func pause(_ duration: Duration) async {
            let end = ContinuousClock.now + duration
            while ContinuousClock.now < end, !stopping.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(20)) }
        }
        let log = Mutex<(requests: [(method: String, path: String, key: String?, headers: [String: String])], applied: [String: Int], redirects: [String: (location: String, key: String)])>(([], [:], [:]))
    }

    private let shared = Shared()

    /// Parcels the server knows.
    public static let parcels: Set<String> = ["3SDEMO0000001", "3SDEMO0000002", "3SDEMO0000003"]

    public init() async throws {
        let port = try FreePort.find()
        self.port = port
        let router = Router()
        let shared = self.shared
        @Sendable func record(_ request: Request, _ path: String) {
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            shared.log.withLock { $0.requests.append((request.method.rawValue, path, request.headers[HTTPField.Name("Idempotency-Key")!], headers)) }
        }
        @Sendable func misbehave() async throws -> Response? {
            shared.inFlight.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
            defer { shared.inFlight.withLock { $0.now -= 1 } }
            let current = shared.behaviour.withLock { state -> Behaviour in
                let copy = state
                if state.failNext > 0 { state.failNext -= 1 }
                return copy
            }
            if current.delay > .zero { await shared.pause(current.delay) }
            if current.failNext > 0 { return Response(status: .serviceUnavailable) }
            if let status = current.forceStatus { return Response(status: HTTPResponse.Status(code: status)) }
            return nil
        }
        // The collection, as a real API has one: what a path with an empty code would reach.
        router.get("/v1/parcels") { request, _ in
            record(request, "/v1/parcels")
            let body: JSONValue = ["parcels": .array(Self.parcels.sorted().map { .string($0) })]
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: JSONEncoding.encode(body))))
        }
        router.get("/v1/parcels/:code") { request, context in
            let code = try context.parameters.require("code")
            record(request, "/v1/parcels/\(code)")
            if let response = try await misbehave() { return response }
            guard Self.parcels.contains(code) else { return Response(status: .notFound) }
            let redirected = shared.log.withLock { $0.redirects[code]?.location }
            let body: JSONValue = [
                "code": .string(code), "status": .string(redirected.map { "Going to pickup point \($0)" } ?? "On its way"),
                "eta": "2026-11-25", "lastScan": ["at": "2026-11-23T08:12:00Z", "place": "Utrecht"],
            ]
            let (bytes, stall) = shared.behaviour.withLock { ($0.parcelBody ?? JSONEncoding.encode(body), $0.stallBody) }
            guard stall > .zero else {
                return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
            }
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: ResponseBody { writer in
                    try await writer.write(ByteBuffer(bytes: bytes.prefix(8)))
                    await shared.pause(stall)
                    try await writer.write(ByteBuffer(bytes: bytes.dropFirst(8)))
                    try await writer.finish(nil)
                })
        }
        router.post("/v1/parcels/:code/redirect") { request, context in
            let code = try context.parameters.require("code")
            record(request, "/v1/parcels/\(code)/redirect")
            let bytes = try await request.body.collect(upTo: 4096)
            if let response = try await misbehave() { return response }
            guard Self.parcels.contains(code) else { return Response(status: .notFound) }
            guard let key = request.headers[HTTPField.Name("Idempotency-Key")!],
                let location = (try? JSONValue.parse(Array(bytes.readableBytesView)))?["location"]?.stringValue
            else { return Response(status: .badRequest) }
            let verdict = shared.log.withLock { state -> Int in
                if let existing = state.redirects[code] {
                    return existing.key == key ? 200 : 409
                }
                state.redirects[code] = (location, key)
                state.applied[key, default: 0] += 1
                return 200
            }
            if verdict == 409 {
                let body: JSONValue = ["error": ["code": "already_redirected", "message": "This parcel already goes to another pickup point."]]
                return Response(status: .conflict, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: JSONEncoding.encode(body))))
            }
            let drop = shared.behaviour.withLock { state -> Bool in
                guard state.dropAfterApplying > 0 else { return false }
                state.dropAfterApplying -= 1
                return true
            }
            let hold = shared.behaviour.withLock { $0.delayAfterApplying }
            if hold > .zero { await shared.pause(hold) }
            if drop {
                // Applied, but the answer never arrives: the head goes out, then the connection breaks.
                return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody { _ in throw CancellationError() })
            }
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: JSONEncoding.encode(["eta": "2026-11-27"]))))
        }
        var logger = Logger(label: "tracking-test-server")
        logger.logLevel = .critical
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger)
        Task { try await app.runService(gracefulShutdownSignals: []) }
        // Wait until it listens.
        for _ in 0..<100 {
            if (try? await Self.probe(port)) == true { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("the tracking test server did not start on port \(port)")
    }

    private static func probe(_ port: Int) async throws -> Bool {
        Loopback.withSocket(port: port) { connect($0, $1, $2) == 0 } ?? false
    }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    public func configure(_ change: (inout Behaviour) -> Void) { shared.behaviour.withLock { change(&$0) } }

    /// Requests received, in order: method, path, idempotency key.
    public var requests: [(method: String, path: String, key: String?)] { shared.log.withLock { $0.requests.map { ($0.method, $0.path, $0.key) } } }

    /// The headers of every request received, in order (lowercased names).
    public var requestHeaders: [[String: String]] { shared.log.withLock { $0.requests.map(\.headers) } }

    /// The most requests the server was handling at once.
    public var mostInFlight: Int { shared.inFlight.withLock { $0.most } }

    /// How many times each idempotency key changed something.
    public var applied: [String: Int] { shared.log.withLock { $0.applied } }

    /// Where each parcel was redirected.
    public var redirects: [String: String] { shared.log.withLock { $0.redirects.mapValues(\.location) } }

    /// Ends every pending delay at once. The server itself keeps listening, idle, until the
    /// test process exits: shutting a Hummingbird server down while a client still connects
    /// can trip an assertion in NIO, and an idle test server costs nothing.
    public func stop() async {
        shared.stopping.withLock { $0 = true }
    }
}
