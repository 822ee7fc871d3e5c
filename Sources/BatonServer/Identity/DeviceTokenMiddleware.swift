import BatonPostgres
import BatonRuntime
import Foundation
import HTTPTypes
import Hummingbird

/// Authenticates anonymous devices (PROTOCOL §1, the App Clip handshake).
///
/// `X-Device-Id` alone proved nothing: anyone who saw a device's subject in a payload could act
/// as that device. Now the first answered request with a new device id registers it and its
/// response carries `X-Device-Token` (an HMAC of the id with a key derived from the payload signing
/// keys); every later request for that device must send the token with the id, or it is
/// refused with 401. Requests with a token cost no database round trip.
///
/// A device id can be claimed without a token only in the first 30 seconds after it was first
/// seen, so concurrent first requests (and a first response lost on the way) still get a token;
/// after that, a device that lost its token starts over with a new random id. A token made with
/// a key that a rotation has put second is accepted, and the answer carries a current one.
public struct DeviceTokenMiddleware: RouterMiddleware {
    public typealias Context = BatonRequestContext

    let signer: PayloadSigner
    let pool: PostgresPool

    public init(signer: PayloadSigner, pool: PostgresPool) {
        self.signer = signer
        self.pool = pool
    }

    public func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        guard let header = request.headers.value(.deviceID) else { return try await next(request, context) }
        guard let uuid = UUID(canonical: String(header.trimmingOptionalWhitespace)) else {
            throw APIError.invalidRequest("X-Device-Id must be a UUID")
        }
        let device = uuid.lowercased
        if let token = request.headers.value(.deviceToken) {
            switch signer.standing(ofDeviceToken: String(token.trimmingOptionalWhitespace), device: device) {
            case .current:
                return try await next(request, context)
            case .older:
                // Made with a key a rotation put second: the answer carries one made with the
                // current key, so the device keeps its id once the older key is removed.
                var response = try await next(request, context)
                response.headers[.deviceToken] = signer.deviceToken(for: device)
                return response
            case .invalid:
                throw APIError.unauthenticated("X-Device-Token was not issued for this X-Device-Id")
            }
        }
        // Free, or first seen within 30 s: checked before the request runs, so nobody acts as a
        // device whose id is taken; registered only once the request was answered, so a refused
        // request (bad input, a 404) changes nothing and leaves the id free.
        let claimable = try await pool.withConnection { connection in
            try await connection.query(
                "SELECT 1 FROM devices WHERE id = $1 AND created_at <= now() - interval '30 seconds'", [uuid]
            ).isEmpty
        }
        guard claimable else {
            throw APIError.unauthenticated(
                "device \(device) is already registered: send the X-Device-Token it was given (a device that lost it starts over with a new X-Device-Id)")
        }
        var response = try await next(request, context)
        guard response.status.code < 400 else { return response }
        try await pool.withConnection { connection in
            _ = try await connection.query("INSERT INTO devices (id) VALUES ($1) ON CONFLICT (id) DO NOTHING", [uuid])
        }
        response.headers[.deviceToken] = signer.deviceToken(for: device)
        return response
    }
}

extension HTTPField.Name {
    public static let deviceToken = Self("X-Device-Token")!
}
