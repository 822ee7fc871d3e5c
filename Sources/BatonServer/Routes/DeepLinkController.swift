import BatonContract
import BatonDeepLinks
import BatonJSON
import BatonRuntime
import Hummingbird
import Logging

/// `POST /v{N}/deeplinks/resolve` with `{"url": "…"}` (PROTOCOL §4): an allowed link answers
/// with the first response of its flow (started for the caller) or with its screen; anything
/// else answers `{"type":"error","code":"link_not_allowed"}` and starts nothing. Both are
/// counted in `baton_deeplinks_total{result,reason}`.
struct DeepLinkController: Sendable {
    let runtime: FlowRuntime
    let authenticator: BearerAuthenticator
    let allowlist: DeepLinkAllowlist
    let screens: ScreenController
    let metrics: BatonMetrics

    func register(on router: Router<BatonRequestContext>, catalog: RouteCatalog) {
        router.on(.post, "/:version/deeplinks/resolve", catalog: catalog) { request, context in
            guard let contract = ClientContext.contractVersion(try context.parameters.require("version")) else {
                throw APIError.notFound("no such endpoint: \(request.uri.path.prefix(200))")
            }
            let body = try await context.body(of: request)
            let url = try Self.parse(Array(buffer: body))
            let identity = try await ClientContext.identity(request, authenticator: authenticator)
            let profile = ClientContext.profile(request, contract: contract)
            if screens.contract.effectiveVersion(contract) == nil {
                let screen = try await screens.updateRequiredReply(profile: profile, identity: identity)
                return Response.json(bytes: screen, headers: [.cacheControl: "no-store"])
            }
            let decision = allowlist.match(url, platform: profile.platform)
            metrics.recordDeepLink(decision.metricDimensions)
            switch decision {
            case .rejected(let reason, _):
                context.logger.info("deep link refused", metadata: ["reason": .string(reason.label)])
                return Response.json(
                    [
                        "type": "error", "code": "link_not_allowed",
                        "message": "This link can't be opened here.", "reason": .string(reason.label),
                    ], headers: [.cacheControl: "no-store"])
            case .allowed(let target, let parameters, _):
                var values = JSONObject()
                for key in parameters.keys.sorted() { values[key] = .string(parameters[key]!) }
                do {
                    switch target {
                    case .flow(let flow):
                        let reply = try await runtime.startFlow(flow, parameters: values, identity: identity, profile: profile)
                        return Response.json(bytes: reply.body, headers: [.cacheControl: "no-store"])
                    case .screen(let name):
                        let reply = try await runtime.renderScreen(name, parameters: values, identity: identity, profile: profile)
                        var body: [UInt8] = Array(#"{"type":"screen","presentation":"push","screen":"#.utf8)
                        body += reply.body
                        body.append(UInt8(ascii: "}"))
                        return Response.json(bytes: body, headers: [.cacheControl: "no-store"])
                    }
                } catch let error as CommandError {
                    throw APIError(commandError: error)
                }
            }
        }
    }

    /// `{"url": "…"}`.
    static func parse(_ bytes: [UInt8]) throws -> String {
        guard !bytes.isEmpty else { throw APIError.invalidJSON("the body is empty; send {\"url\": \"…\"}") }
        let json: JSONValue
        do { json = try JSONValue.parse(bytes) } catch let error as JSONValue.ParseError {
            throw APIError.invalidJSON("the body is not valid JSON: \(error.description)")
        }
        guard case .object(let object) = json, let url = object["url"]?.stringValue else {
            throw APIError.invalidRequest("the body must be {\"url\": \"<link>\"}")
        }
        return url
    }
}
