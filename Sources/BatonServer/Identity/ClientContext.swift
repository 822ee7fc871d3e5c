import BatonPostgres
import BatonRuntime
import Foundation
import HTTPTypes
import Hummingbird

/// Reads who is calling and what their app can render from the request (PROTOCOL §1).
public struct ClientContext: Sendable {
    /// Platforms reported as themselves in metrics; anything else is `other`.
    public static let platforms: Set<String> = ["ios", "android", "web", "appclip", "widget"]

    /// The contract version a route's `/v{N}` segment names; `404` when it names none: no such
    /// endpoint (`/vx/command`), or a version out of range (`/v0`, `/v123456`).
    static func contractVersion(_ request: Request, context: BatonRequestContext) throws -> Int {
        let segment = try context.parameters.require("version")
        if let version = contractVersion(segment) { return version }
        if segment.count > 1, segment.hasPrefix("v"), segment.utf8.dropFirst().allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            throw APIError.notFound("contract version \(segment.prefix(24)) is out of range: /v1 to /v99999")
        }
        throw APIError.notFound("no such endpoint: \(request.uri.path.prefix(200))")
    }

    /// The contract version from a `/v{N}/…` path segment, or nil if it is not one.
    public static func contractVersion(_ segment: String) -> Int? {
        guard segment.hasPrefix("v"), segment.count <= 6, let number = Int(segment.dropFirst()), number >= 1,
            segment.dropFirst().allSatisfy(\.isNumber)
        else { return nil }
        return number
    }

    /// The client's profile from its headers.
    public static func profile(_ request: Request, contract: Int) -> ClientProfile {
        let platform = request.headers.value(.clientPlatform).map { $0.lowercased() }.flatMap { platforms.contains($0) ? $0 : nil } ?? "other"
        let version = request.headers.value(.clientVersion).map { String($0.prefix(32)) }
        var capabilities = Set<String>()
        if let header = request.headers.value(.clientCapabilities) {
            for item in header.split(separator: ",").prefix(32) {
                let name = item.trimmingOptionalWhitespace.lowercased()
                if !name.isEmpty, name.count <= 40, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) {
                    capabilities.insert(name)
                }
            }
        }
        return ClientProfile(contract: contract, platform: platform, appVersion: version, capabilities: capabilities)
    }

    /// The verified identity: the bearer token's user (401 if the token is bad) and the
    /// device id (400 if it is not a UUID).
    public static func identity(_ request: Request, context: BatonRequestContext, authenticator: BearerAuthenticator) async throws
        -> ClientIdentity
    {
        var identity = try await identity(request, authenticator: authenticator)
        identity.address = context.remoteAddress
        return identity
    }

    /// The verified identity, without the client's address.
    public static func identity(_ request: Request, authenticator: BearerAuthenticator) async throws -> ClientIdentity {
        var identity = ClientIdentity()
        if let authorization = request.headers.value(.authorization) {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else {
                throw APIError.unauthenticated("Authorization must be 'Bearer <token>'")
            }
            do {
                identity.user = try await authenticator.user(fromToken: String(parts[1].trimmingOptionalWhitespace))
            } catch let failure as BearerAuthenticator.Failure {
                throw APIError.unauthenticated(failure.description)
            }
        }
        if let device = request.headers.value(.deviceID) {
            guard let uuid = UUID(canonical: String(device.trimmingOptionalWhitespace)) else {
                throw APIError.invalidRequest("X-Device-Id must be a UUID")
            }
            identity.device = uuid.lowercased
        }
        return identity
    }
}

extension HTTPField.Name {
    public static let clientPlatform = Self("X-Client-Platform")!
    public static let clientVersion = Self("X-Client-Version")!
    public static let clientCapabilities = Self("X-Client-Capabilities")!
    public static let deviceID = Self("X-Device-Id")!
}
