import BatonFlows
import BatonJSON
import Foundation
import Synchronization

/// A scenario's stand-in for backend services: answers declared under `services:` in the
/// scenario file, so a flow is tested before (or without) the service it calls.
///
/// ```yaml
/// services:
///   tracking:
///     - { method: GET, path: /v1/parcels/3SDEMO0000001, status: 200, body: { code: 3SDEMO0000001, status: On its way } }
///     - { method: GET, path: /v1/parcels/3SDEMO9999999, status: 404 }
///     - { method: POST, path: /v1/parcels/3SDEMO0000001/redirect, failure: timeout, delay: 50ms }
/// ```
///
/// A call with no matching stub fails the scenario (and answers the flow `refused`).
public final class ScenarioServices: ServiceCaller {
    /// One canned answer.
    public struct Stub: Sendable {
        public var service: String
        public var method: String
        /// The path, exactly (query excluded), or ending in `*` for a prefix.
        public var path: String
        public var result: ServiceResult
        public var delay: Duration
        public var location: SourceLocation

        func matches(_ request: ServiceRequest) -> Bool {
            guard service == request.service, method == request.method else { return false }
            if path.hasSuffix("*") { return request.path.hasPrefix(String(path.dropLast())) }
            return path == request.path
        }
    }

    private let stubs: [Stub]
    private let state = Mutex<(calls: [ServiceRequest], unmatched: [String])>(([], []))

    public init(stubs: [Stub]) { self.stubs = stubs }

    /// Calls made so far, in order.
    public var calls: [ServiceRequest] { state.withLock { $0.calls } }

    /// Calls no stub answered, described (then forgotten).
    public func takeUnmatched() -> [String] {
        state.withLock { state in
            defer { state.unmatched.removeAll() }
            return state.unmatched
        }
    }

    public func call(_ request: ServiceRequest, service: ServiceDefinition) async -> ServiceResult {
        state.withLock { $0.calls.append(request) }
        guard let stub = stubs.first(where: { $0.matches(request) }) else {
            state.withLock { $0.unmatched.append("no stub answers \(request.method) \(request.target) on service '\(request.service)'") }
            return .failure(.refused)
        }
        if stub.delay > .zero { try? await Task.sleep(for: stub.delay) }
        return stub.result
    }

    static let stubKeys: Set<String> = ["method", "path", "status", "body", "failure", "delay"]

    /// Reads `services:` of a scenario file.
    static func stubs(_ node: SourceNode, error: (String, SourceLocation) -> Void) -> [Stub] {
        guard case .mapping(let services, _) = node else {
            error("services maps service names to lists of stubs", node.location)
            return []
        }
        var stubs: [Stub] = []
        for (name, list) in services {
            guard case .sequence(let items, _) = list else {
                error("services.\(name.text) must be a list of {method, path, status, body} or {method, path, failure}", list.location)
                continue
            }
            for item in items {
                guard case .mapping(let pairs, _) = item else {
                    error("a stub is a mapping {method, path, status, body, failure, delay}", item.location)
                    continue
                }
                for (key, _) in pairs where !stubKeys.contains(key.text) { error("unknown key '\(key.text)' in a stub", key.location) }
                func text(_ key: String) -> String? {
                    if case .scalar(let scalar)? = item[key] { return scalar.text }
                    return nil
                }
                guard let path = text("path"), path.hasPrefix("/") else {
                    error("a stub needs path: /… (the path below the service's base URL)", item.location)
                    continue
                }
                let result: ServiceResult
                if let failure = text("failure") {
                    guard let kind = ServiceFailure(rawValue: failure) else {
                        error("failure must be one of \(ServiceFailure.allCases.map(\.rawValue).joined(separator: ", "))", item.location)
                        continue
                    }
                    result = .failure(kind)
                } else if let status = text("status").flatMap(Int.init), (100...599).contains(status) {
                    result = .response(status: status, body: item["body"]?.jsonValue ?? .null)
                } else {
                    error("a stub needs status: <100–599> (with an optional body) or failure: <kind>", item.location)
                    continue
                }
                var delay = Duration.zero
                if let text = text("delay") {
                    guard let parsed = FlowLoaderDurations.callTimeout(text) else {
                        error("delay must look like 50ms or 1s", item.location)
                        continue
                    }
                    delay = parsed
                }
                stubs.append(
                    Stub(
                        service: name.text, method: (text("method") ?? "GET").uppercased(), path: path, result: result, delay: delay,
                        location: item.location))
            }
        }
        return stubs
    }
}
