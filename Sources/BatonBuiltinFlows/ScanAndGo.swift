import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import Foundation

/// Scan & Go: drop a registered parcel off at a location by scanning its label.
enum ScanAndGo {
    static let sizes = ["S": "Small", "M": "Medium", "L": "Large"]
    /// Receipt codes avoid characters people confuse (0/O, 1/I).
    static let receiptAlphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")

    static func register(into registry: inout FlowRegistry) {
        // Label lookups per subject and per client address: 20 and 60 a minute, per registry
        // (one per server), so every application (and every test) counts its own.
        let lookups = LookupLimits(perSubject: 20, perAddress: 60, window: 60)
        registry.loader("locations.list", returnsList: true, fields: locationFields) { call in
            .array(try await call.database.query("SELECT code, name, address FROM dropoff_locations ORDER BY code").map(location))
        }

        registry.loader("locations.get", arguments: [ArgumentSpec("code")], fields: locationFields) { call in
            guard let row = try await call.database.query(
                "SELECT code, name, address FROM dropoff_locations WHERE code = $1", [try call.string("code")]
            ).first else { throw FlowCallError.notFound("no such drop-off location") }
            return try location(row)
        }

        registry.guardCheck("locations.exists", arguments: [ArgumentSpec("code")]) { call in
            !(try await call.database.query("SELECT 1 FROM dropoff_locations WHERE code = $1", [try call.string("code")]).isEmpty)
        }

        registry.effect(
            "shipments.lookup", arguments: [ArgumentSpec("code")], outcomes: ["found", "unknown", "dropped"],
            fields: [FieldSpec("code"), FieldSpec("recipient"), FieldSpec("postcode"), FieldSpec("size"), FieldSpec("sizeName")]
        ) { call in
            let code = try call.string("code")
            // Label lookups reveal whether a code is a parcel: bounded per subject and per address.
            try lookups.admit(call)
            guard let row = try await call.database.query(
                """
                SELECT s.label, s.recipient, s.postcode, s.size, d.id IS NOT NULL
                FROM shipments s LEFT JOIN dropoffs d ON d.label = s.label WHERE s.label = $1
                """, [code]
            ).first else { return EffectResult("unknown", ["code": .string(code)]) }
            let size = try row.decode(String.self, at: 3)
            // Whoever holds a label (or guesses one) sees enough to recognise the parcel, never
            // the recipient's name or full postcode: initials and a partial postcode.
            let data: JSONValue = [
                "code": .string(code), "recipient": .string(mask(name: try row.decode(String.self, at: 1))),
                "postcode": .string(mask(postcode: try row.decode(String.self, at: 2))), "size": .string(size),
                "sizeName": .string(sizes[size] ?? size),
            ]
            return EffectResult(try row.decode(Bool.self, at: 4) ? "dropped" : "found", data)
        }

        registry.effect(
            "dropoffs.register", arguments: [ArgumentSpec("code"), ArgumentSpec("location")], outcomes: ["registered", "already"],
            fields: [FieldSpec("receipt"), FieldSpec("location"), FieldSpec("locationCode"), FieldSpec("code")]
        ) { call in
            let code = try call.string("code")
            let locationCode = try call.string("location")
            guard let place = try await call.database.query("SELECT name FROM dropoff_locations WHERE code = $1", [locationCode]).first
            else { throw FlowCallError.notFound("no such drop-off location") }
            let placeName = try place.decode(String.self, at: 0)
            // The label is unique in dropoffs: a parcel is dropped off once, whoever tries again.
            for _ in 0..<4 {
                let receipt = "R-" + String((0..<6).map { _ in receiptAlphabet.randomElement()! })
                let rows = try await call.database.query(
                    """
                    INSERT INTO dropoffs (id, label, location, subject, receipt) VALUES ($1, $2, $3, $4, $5)
                    ON CONFLICT DO NOTHING RETURNING receipt
                    """, [UUID(), code, locationCode, call.subject.description, receipt])
                if !rows.isEmpty {
                    return EffectResult(
                        "registered",
                        ["receipt": .string(receipt), "location": .string(placeName), "locationCode": .string(locationCode), "code": .string(code)])
                }
                if try await !call.database.query("SELECT 1 FROM dropoffs WHERE label = $1", [code]).isEmpty {
                    return EffectResult("already", ["code": .string(code)])
                }
                // A receipt code collision: draw another.
            }
            throw FlowCallError.invalid("could not draw a unique receipt code")
        }
    }

    /// "Gerrit van der Smit" → "G. v. d. S.".
    static func mask(name: String) -> String {
        name.split(whereSeparator: \.isWhitespace).compactMap { $0.first.map { "\($0)." } }.joined(separator: " ")
    }

    /// "3507 AB" → "3507 A·": the digits (a town), one letter, the rest hidden.
    static func mask(postcode: String) -> String {
        let compact = postcode.filter { !$0.isWhitespace }
        let digits = compact.prefix { $0.isNumber }
        let rest = compact.dropFirst(digits.count)
        guard let first = rest.first else { return String(digits) }
        return "\(digits) \(first)" + String(repeating: "·", count: max(1, rest.count - 1))
    }

    /// The fields of ``location(_:)``.
    static let locationFields = [FieldSpec("code"), FieldSpec("name"), FieldSpec("address")]

    static func location(_ row: PostgresRow) throws -> JSONValue {
        [
            "code": .string(try row.decode(String.self, at: 0)), "name": .string(try row.decode(String.self, at: 1)),
            "address": .string(try row.decode(String.self, at: 2)),
        ]
    }
}
