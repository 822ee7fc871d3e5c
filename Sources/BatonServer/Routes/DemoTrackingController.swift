import BatonJSON
import BatonPostgres
import Foundation
import HTTPTypes
import Hummingbird

/// A demo of the company's tracking API, backed by the demo shipments, served at
/// `/demo/tracking` in development when `baton.service.tracking.url` is not set (so the
/// built-in `track-parcel` flow works with nothing else installed):
///
/// - `GET /demo/tracking/v1/parcels/{code}` → `{"code","status","eta","lastScan":{"at","place"}}`, or 404;
/// - `POST /demo/tracking/v1/parcels/{code}/redirect` with `{"location": "UT-0001"}` and an
///   `Idempotency-Key` → `{"eta": …}`; 409 when the parcel is already on its way elsewhere or
///   was dropped off; the same key answers the same again.
public struct DemoTrackingController: Sendable {
    let pool: PostgresPool

    public static let prefix = "/demo/tracking"

    /// The demo's base URL on this server, bound to `host`: a wildcard or `localhost` is reached
    /// on 127.0.0.1, an IPv6 address in brackets, any other address as it is.
    public static func url(host: String, port: Int) -> String {
        let reachable: String
        switch host {
        case "0.0.0.0", "localhost", "": reachable = "127.0.0.1"
        case "::": reachable = "[::1]"
        default: reachable = host.contains(":") ? "[\(host)]" : host
        }
        return "http://\(reachable):\(port)\(prefix)"
    }

    func register(on router: Router<BatonRequestContext>, catalog: RouteCatalog) {
        router.on(.get, "\(Self.prefix)/v1/parcels/:code", catalog: catalog) { _, context in
            let code = try context.parameters.require("code")
            let parcel = try await pool.withConnection { db in try await Self.parcel(db, code: code) }
            guard let parcel else { throw APIError.notFound("no parcel \(code.prefix(20))") }
            return Response.json(parcel)
        }
        router.on(.post, "\(Self.prefix)/v1/parcels/:code/redirect", catalog: catalog) { request, context in
            let code = try context.parameters.require("code")
            guard let key = request.headers[HTTPField.Name("Idempotency-Key")!], !key.isEmpty, key.utf8.count <= 128 else {
                throw APIError.invalidRequest("Idempotency-Key is required")
            }
            let bytes = try await request.collectBody(limit: 4096)
            guard let body = try? JSONValue.parse(Array(bytes.readableBytesView)), let location = body["location"]?.stringValue else {
                throw APIError.invalidRequest("send {\"location\": \"UT-0001\"}")
            }
            return try await pool.withTransaction { db -> Response in
                guard try await db.query("SELECT 1 FROM shipments WHERE label = $1 FOR UPDATE", [code]).first != nil else {
                    throw APIError.notFound("no parcel \(code.prefix(20))")
                }
                guard try await db.query("SELECT 1 FROM dropoff_locations WHERE code = $1", [location]).first != nil else {
                    throw APIError.invalidRequest("no pickup point \(location.prefix(20))")
                }
                if let row = try await db.query("SELECT location, idempotency_key FROM demo_parcel_redirects WHERE label = $1", [code]).first {
                    if try row.decode(String.self, at: 1) == key, try row.decode(String.self, at: 0) == location {
                        return Response.json(["eta": .string(Self.eta(days: 2))])
                    }
                    return Response.json(
                        ["error": ["code": "already_redirected", "message": "This parcel is already on its way to another pickup point."]],
                        status: .conflict)
                }
                if try await db.query("SELECT 1 FROM dropoffs WHERE label = $1", [code]).first != nil {
                    return Response.json(
                        ["error": ["code": "in_transit", "message": "This parcel is already in our network and can't be redirected."]],
                        status: .conflict)
                }
                try await db.query(
                    "INSERT INTO demo_parcel_redirects (label, location, idempotency_key) VALUES ($1, $2, $3)", [code, location, key])
                return Response.json(["eta": .string(Self.eta(days: 2))])
            }
        }
    }

    static func parcel(_ db: PostgresConnection, code: String) async throws -> JSONValue? {
        guard
            let row = try await db.query(
                """
                SELECT s.label, l.name, d.created_at, r.location, rl.name
                FROM shipments s
                LEFT JOIN dropoffs d ON d.label = s.label
                LEFT JOIN dropoff_locations l ON l.code = d.location
                LEFT JOIN demo_parcel_redirects r ON r.label = s.label
                LEFT JOIN dropoff_locations rl ON rl.code = r.location
                WHERE s.label = $1
                """, [code]
            ).first
        else { return nil }
        let droppedAt = try row.decode(String?.self, at: 1)
        let redirectedTo = try row.decode(String?.self, at: 4)
        let status: String
        var lastScan: JSONValue = .null
        if let droppedAt {
            status = "Dropped off at \(droppedAt)"
            lastScan = ["at": .string(ISO8601DateFormatter().string(from: try row.decode(Date.self, at: 2))), "place": .string(droppedAt)]
        } else if let redirectedTo {
            status = "Waiting to be dropped off; it will go to pickup point \(redirectedTo)"
        } else {
            status = "Registered; waiting to be dropped off"
        }
        return [
            "code": .string(try row.decode(String.self, at: 0)), "status": .string(status), "eta": .string(eta(days: 2)),
            "lastScan": lastScan,
        ]
    }

    /// A date `days` from today, `YYYY-MM-DD`.
    static func eta(days: Int) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        return formatter.string(from: Date().addingTimeInterval(Double(days) * 86400))
    }
}
