import BatonContract
import BatonJSON
import BatonRuntime
import Foundation
import Hummingbird

/// `GET /v{N}/screens/{name}?params`: a screen template filled for this client (PROTOCOL §2),
/// with a strong ETag and `304 Not Modified` when `If-None-Match` matches.
struct ScreenController: Sendable {
    let runtime: FlowRuntime
    let authenticator: BearerAuthenticator
    /// The contract served now (a release may swap it).
    let live: LiveDefinitions
    var contract: ContractRegistry { live.contract }
    let metrics: BatonMetrics
    let buckets: ClientBuckets

    /// The screen every client below the oldest supported contract version gets.
    static let updateRequired = "update-required"

    func register(on router: Router<BatonRequestContext>, catalog: RouteCatalog) {
        router.on(.get, "/:version/screens/:name", catalog: catalog) { request, context in
            let contractVersion = try ClientContext.contractVersion(request, context: context)
            let name = try context.parameters.require("name")
            guard name.count <= 64, name.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-" || $0 == "_") }) else {
                throw APIError.notFound("there is no screen '\(name.prefix(64))'")
            }
            let parameters = try Self.parameters(request)
            let identity = try await ClientContext.identity(request, context: context, authenticator: authenticator)
            let profile = ClientContext.profile(request, contract: contractVersion)
            let reply =
                contract.effectiveVersion(contractVersion) == nil
                ? try await updateRequired(profile: profile, identity: identity)
                : try await runtime.renderScreen(name, parameters: parameters, identity: identity, profile: profile)
            var headers: HTTPFields = [
                .eTag: reply.etag, .cacheControl: "private, no-cache",
                .vary: "Authorization, X-Device-Id, X-Client-Platform, X-Client-Capabilities",
            ]
            if let condition = request.headers.value(.ifNoneMatch), Self.matches(condition, etag: reply.etag) {
                headers[.contentType] = nil
                return Response(status: .notModified, headers: headers)
            }
            headers[.contentType] = Response.jsonContentType
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: reply.body)))
        }
    }

    /// The update-required screen, built from the oldest contract's components, counted. The
    /// profile keeps the contract the client asked for: the downgrade pass serves a version
    /// below the oldest as the oldest, and counts the screen under the version asked for, not
    /// as traffic of the oldest supported one.
    func updateRequired(profile: ClientProfile, identity: ClientIdentity) async throws -> ScreenReply {
        metrics.recordUnsupportedClient(
            platform: buckets.platform(profile), contract: buckets.contract(profile.contract, oldest: contract.oldest, newest: contract.newest),
            appVersion: buckets.appVersion(profile.appVersion))
        var unsupported = profile
        unsupported.capabilities = []
        return try await runtime.renderScreen(Self.updateRequired, parameters: [:], identity: identity, profile: unsupported)
    }

    /// The update-required screen as a command-style answer (`{"type":"screen",…}`).
    func updateRequiredReply(profile: ClientProfile, identity: ClientIdentity) async throws -> [UInt8] {
        let screen = try await updateRequired(profile: profile, identity: identity)
        var body: [UInt8] = Array(#"{"type":"screen","presentation":"replace","screen":"#.utf8)
        body += screen.body
        body.append(UInt8(ascii: "}"))
        return body
    }

    /// Query items as screen parameters; a repeated name is refused rather than guessed.
    static func parameters(_ request: Request) throws -> JSONObject {
        var parameters = JSONObject()
        var count = 0
        for (key, value) in request.uri.queryParameters {
            count += 1
            guard count <= 32 else { throw APIError.invalidRequest("too many query parameters (at most 32)") }
            let name = String(key)
            guard parameters[name] == nil else { throw APIError.invalidRequest("query parameter '\(name.prefix(64))' is repeated") }
            guard value.utf8.count <= 1024, name.utf8.count <= 64 else { throw APIError.invalidRequest("a query parameter is too long") }
            parameters[name] = .string(String(value))
        }
        return parameters
    }

    /// `If-None-Match` against a strong ETag: `*`, or any listed tag, weak or not (RFC 9110
    /// uses the weak comparison for If-None-Match).
    static func matches(_ header: String, etag: String) -> Bool {
        let opaque = etag
        for part in header.split(separator: ",") {
            var tag = String(part.trimmingOptionalWhitespace)
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag = String(tag.dropFirst(2)) }
            if tag == opaque { return true }
        }
        return false
    }
}
