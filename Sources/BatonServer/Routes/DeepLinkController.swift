import BatonContract
import BatonDeepLinks
import BatonJSON
import BatonFlows
import BatonRuntime
import Hummingbird
import Logging

/// `POST /v{N}/deeplinks/resolve` with `{"url": "…"}` (PROTOCOL §4): an allowed link answers
/// with the first response of its flow (started for the caller) or with its screen; anything
/// else answers `{"type":"error","code":"link_not_allowed"}` and starts nothing. Both are
/// counted in `baton_deeplinks_total{result,reason}`. A client that may retry sends an
/// `Idempotency-Key`: the retry gets the first reply instead of a second session.
struct DeepLinkController: Sendable {
    let runtime: FlowRuntime
    let authenticator: BearerAuthenticator
    /// The allowlist served now (a release may swap it).
    let live: LiveDefinitions
    let screens: ScreenController
    let metrics: BatonMetrics

    func register(on router: Router<BatonRequestContext>, catalog: RouteCatalog) {
        router.on(.post, "/:version/deeplinks/resolve", catalog: catalog) { request, context in
            let contract = try ClientContext.contractVersion(request, context: context)
            let body = try await context.body(of: request)
            let url = try Self.parse(Array(buffer: body))
            let identity = try await ClientContext.identity(request, context: context, authenticator: authenticator)
            let profile = ClientContext.profile(request, contract: contract)
            // A malformed key is refused whatever the link: checked before the allowlist decides.
            let idempotency = try Self.idempotencyKey(request, body: body, identity: identity)
            if screens.contract.effectiveVersion(contract) == nil {
                let screen = try await screens.updateRequiredReply(profile: profile, identity: identity)
                return Response.json(bytes: screen, headers: [.cacheControl: "no-store"])
            }
            guard let allowlist = live.allowlist else { throw APIError.notFound("deep links are not configured") }
            var decision = allowlist.match(url, platform: profile.platform)
            // A value the entry's pattern lets through may still be one its target refuses (the
            // allowlist's `^[A-Za-z0-9-]{1,64}$` before a screen's `^[0-9a-f-]{36}$`): a link that
            // cannot open, answered as one.
            var values = JSONObject()
            if case .allowed(let target, let parameters, _) = decision {
                for key in parameters.keys.sorted() { values[key] = .string(parameters[key]!) }
                if let problem = runtime.linkParameterProblem(target.runtimeTarget, parameters: values) {
                    decision = .rejected(.parameterInvalid, detail: problem)
                }
            }
            metrics.recordDeepLink(decision.metricDimensions)
            switch decision {
            case .rejected(let reason, _):
                context.logger.info("deep link refused", metadata: ["reason": .string(reason.label)])
                return Response.json(
                    [
                        "type": "error", "code": "link_not_allowed",
                        "message": "This link can't be opened here.", "reason": .string(reason.label),
                    ], headers: [.cacheControl: "no-store"])
            case .allowed(let target, _, _):
                let reply = try await runtime.resolveLink(
                    target.runtimeTarget, parameters: values, identity: identity, profile: profile, idempotency: idempotency)
                var headers: HTTPFields = [.cacheControl: "no-store"]
                if reply.replayed { headers[.idempotentReplay] = "true" }
                return Response.json(bytes: reply.body, headers: headers)
            }
        }
    }

    /// The request's `Idempotency-Key`, scoped to the caller and bound to the request's
    /// method, path and body; nil when the client sent none.
    static func idempotencyKey(_ request: Request, body: ByteBuffer, identity: ClientIdentity) throws -> IdempotencyKey? {
        let values = request.headers[values: .idempotencyKey]
        guard let value = values.first else { return nil }
        guard values.count == 1, let key = IdempotencyKey.key(fromHeader: value) else {
            throw APIError.invalidRequest(
                "Idempotency-Key must be one value: 1 to 255 visible ASCII characters, or a quoted string (\"…\") of 1 to 255 printable ASCII characters")
        }
        return IdempotencyKey(
            scope: identity.primarySubject?.description ?? "anonymous", key: key,
            requestDigest: IdempotencyKey.digest(method: request.method.rawValue, path: request.uri.path, body: Array(buffer: body)))
    }

    /// `{"url": "…"}`.
    static func parse(_ bytes: [UInt8]) throws -> String {
        guard !bytes.isEmpty else { throw APIError.invalidJSON("the body is empty; send {\"url\": \"…\"}") }
        let json: JSONValue
        do { json = try JSONValue.parse(bytes) } catch let error as JSONValue.ParseError {
            throw APIError.invalidJSON("the body is \(error.description)")
        }
        guard case .object(let object) = json, let url = object["url"]?.stringValue else {
            throw APIError.invalidRequest("the body must be {\"url\": \"<link>\"}")
        }
        return url
    }
}

extension DeepLinkTarget {
    var runtimeTarget: FlowRuntime.LinkTarget {
        switch self {
        case .flow(let flow): .flow(flow)
        case .screen(let screen): .screen(screen)
        }
    }
}
