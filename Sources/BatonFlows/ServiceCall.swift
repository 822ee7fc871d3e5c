import BatonJSON
import Crypto
import Foundation

/// An HTTP call a transition makes to a backend service declared in `Flows/services.yaml`
/// (`call:` in a flow file). Method, path, query and body are templates; the answer chooses
/// the transition's outcome by status code, and its JSON body is `{{result…}}` afterwards.
public struct ServiceCallSpec: Sendable {
    /// The service's name in `services.yaml`.
    public var service: String
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    public var method: String
    /// The path below the service's base URL; each reference's value is percent-encoded as one
    /// path segment, so input can never change which resource is called.
    public var path: TemplateString
    public var query: [(name: String, value: TemplateString)]
    /// The JSON body (not for `GET`/`DELETE`).
    public var body: JSONTemplate?
    /// Per-attempt timeout, overriding the service's.
    public var timeout: Duration?
    public var location: SourceLocation

    public init(
        service: String, method: String, path: TemplateString, query: [(name: String, value: TemplateString)] = [],
        body: JSONTemplate? = nil, timeout: Duration? = nil, location: SourceLocation
    ) {
        self.service = service
        self.method = method
        self.path = path
        self.query = query
        self.body = body
        self.timeout = timeout
        self.location = location
    }

    /// The call's identity within its flow definition (its position). A session paused on the
    /// call finds it again by this id; sessions keep the definition they started on, so it is
    /// stable for them.
    public var id: String { "\(location.line):\(location.column)" }

    /// The methods a call may use.
    public static let methods: Set<String> = ["GET", "POST", "PUT", "PATCH", "DELETE"]

    /// Whether the method changes something downstream (and so carries an idempotency key).
    public var isWrite: Bool { method != "GET" }

    /// The request for one session: the path's references percent-encoded, query and body
    /// rendered.
    public func render(_ scope: TemplateScope) -> ServiceRequest {
        var path = ""
        var unsendable: String?
        for segment in self.path.segments {
            switch segment {
            case .literal(let text): path += text
            case .reference(let reference):
                let value = scope.lookup(reference)?.interpolationText ?? ""
                // An empty segment would call the resource above the one meant (`/v1/parcels/`
                // for `/v1/parcels/{{params.code}}`), and so would `.` or `..` once a service or
                // proxy normalises their encoding (%2E%2E is `..`, RFC 3986 §6.2.2.2): the call
                // is refused instead.
                if unsendable == nil, value.isEmpty || value == "." || value == ".." {
                    let name = "{{" + reference.joined(separator: ".") + "}}"
                    unsendable = value.isEmpty ? "the path's \(name) is empty" : "the path's \(name) is the dot segment '\(value)'"
                }
                path += value.addingPercentEncoding(withAllowedCharacters: Self.segmentCharacters) ?? ""
            }
        }
        // (Spelled out: JSONValue is ExpressibleByNilLiteral, so a bare `nil` here could become `.null`.)
        var body: JSONValue? = Optional.none
        if isWrite, let template = self.body { body = template.render(scope) }
        var request = ServiceRequest(
            service: service, method: method, path: path, query: query.map { ($0.name, $0.value.render(scope)) }, body: body,
            timeout: timeout)
        request.unsendable = unsendable
        return request
    }

    /// RFC 3986 unreserved characters: everything else in a value is escaped, `/` and `.` too
    /// where they could form `..`.
    static let segmentCharacters: CharacterSet = {
        var set = CharacterSet()
        set.insert(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~")
        return set
    }()
}

/// One call as it goes on the wire (before the service's base URL and auth are added).
public struct ServiceRequest: Sendable, Equatable {
    public var service: String
    public var method: String
    /// Starts with `/`; already percent-encoded.
    public var path: String
    public var query: [(String, String)]
    public var body: JSONValue?
    public var timeout: Duration?
    /// Sent as `Idempotency-Key` on every attempt of a write.
    public var idempotencyKey: String?
    /// Attempts in all, overriding the service's (screen loads make one).
    public var attempts: Int?
    /// The most the whole call may take, every attempt and backoff included (the runtime keeps
    /// a call inside its request's deadline); nil: the service's worst case.
    public var budget: Duration?
    /// Why the request cannot be sent as rendered (a path reference that is missing, empty, `.`
    /// or `..`); the runtime answers such a call `refused` without sending it.
    public var unsendable: String?

    public init(
        service: String, method: String, path: String, query: [(String, String)] = [], body: JSONValue? = nil,
        timeout: Duration? = nil, idempotencyKey: String? = nil
    ) {
        self.service = service
        self.method = method
        self.path = path
        self.query = query
        self.body = body
        self.timeout = timeout
        self.idempotencyKey = idempotencyKey
    }

    public static func == (a: ServiceRequest, b: ServiceRequest) -> Bool {
        a.service == b.service && a.method == b.method && a.path == b.path && a.body == b.body && a.timeout == b.timeout
            && a.idempotencyKey == b.idempotencyKey && a.unsendable == b.unsendable && a.query.map(\.0) == b.query.map(\.0) && a.query.map(\.1) == b.query.map(\.1)
    }

    /// The path with the query string, as logged and sent.
    public var target: String {
        guard !query.isEmpty else { return path }
        let pairs = query.map { name, value in
            let encoded = value.addingPercentEncoding(withAllowedCharacters: ServiceCallSpec.segmentCharacters) ?? ""
            return "\(name)=\(encoded)"
        }
        return path + "?" + pairs.joined(separator: "&")
    }

    /// The JSON form kept in a session while the call is in flight.
    public var jsonValue: JSONValue {
        var object: JSONObject = [
            "service": .string(service), "method": .string(method), "path": .string(path),
            "query": .array(query.map { .array([.string($0.0), .string($0.1)]) }),
        ]
        if let body { object["body"] = body }
        if let timeout { object["timeoutMs"] = .int(Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)) }
        if let idempotencyKey { object["idempotencyKey"] = .string(idempotencyKey) }
        if let unsendable { object["unsendable"] = .string(unsendable) }
        return .object(object)
    }

    public init?(json: JSONValue) {
        guard let object = json.objectValue, let service = object["service"]?.stringValue, let method = object["method"]?.stringValue,
            let path = object["path"]?.stringValue
        else { return nil }
        let query = (object["query"]?.arrayValue ?? []).compactMap { pair -> (String, String)? in
            guard let items = pair.arrayValue, items.count == 2, let name = items[0].stringValue, let value = items[1].stringValue else {
                return nil
            }
            return (name, value)
        }
        self.init(
            service: service, method: method, path: path, query: query, body: object["body"],
            timeout: object["timeoutMs"]?.intValue.map { .milliseconds($0) }, idempotencyKey: object["idempotencyKey"]?.stringValue)
        self.unsendable = object["unsendable"]?.stringValue
    }

    /// The idempotency key of a write made by `session` at `step` for `event`: the same for
    /// every retry of that command — the client's, Baton's own, and after a Baton crash — and
    /// different for any other command. Derived, not random, so nothing has to be stored
    /// before the call for a retry to find it.
    public static func idempotencyKey(session: String, step: Int, event: String, call: String) -> String {
        let digest = SHA256.hash(data: Data("baton-call\u{0}\(session)\u{0}\(step)\u{0}\(event)\u{0}\(call)".utf8))
        return "baton-" + Hex.encode(bytesOf: digest, prefix: 16)
    }
}

/// How a call ended, as a flow sees it.
public enum ServiceResult: Sendable, Equatable {
    /// The service answered (after any retries) with this status; `body` is its JSON (null
    /// when the body was empty).
    case response(status: Int, body: JSONValue)
    /// No usable answer.
    case failure(ServiceFailure)

    /// The outcome names a transition's `outcomes` are searched with, most specific first:
    /// `404`, `4xx`; for failures their own name, then `unavailable`.
    public var outcomeKeys: [String] {
        switch self {
        case .response(let status, _): ["\(status)", "\(status / 100)xx"]
        case .failure(let failure): [failure.rawValue, "unavailable"]
        }
    }

    /// What `{{result…}}` holds afterwards: the response body, or for a failure
    /// `{"failure": "<kind>"}`.
    public var resultValue: JSONValue {
        switch self {
        case .response(_, let body): body
        case .failure(let failure): ["failure": .string(failure.rawValue)]
        }
    }
}

/// Why a call produced no usable answer. Each is an outcome a flow must handle (or handle all
/// of them as `unavailable`).
public enum ServiceFailure: String, Sendable, CaseIterable {
    /// No answer within the timeout (every attempt).
    case timeout
    /// The service failed recently and its circuit is open: the call was not made.
    case circuitOpen = "circuit_open"
    /// Connection refused or lost, a 5xx after every retry, or a status the flow does not handle.
    case failed
    /// The body was not JSON.
    case badResponse = "bad_response"
    /// The call was refused before it left: the address is not the service's, or is private,
    /// or a path reference was missing, empty, `.` or `..`.
    case refused
}

/// Makes service calls (the HTTP client in the server; stubs in scenarios and tests).
public protocol ServiceCaller: Sendable {
    /// Makes `request` to the service `service` declares (as the served release declares it:
    /// timeouts, retries and the rest change with a release).
    func call(_ request: ServiceRequest, service: ServiceDefinition) async -> ServiceResult
}

/// A caller with no services: every call fails (for tools that never call out).
public struct NoServices: ServiceCaller {
    public init() {}
    public func call(_ request: ServiceRequest, service: ServiceDefinition) async -> ServiceResult { .failure(.refused) }
}
