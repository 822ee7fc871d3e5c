import BatonPostgres
import BatonTestSupport
import Foundation
import Testing

@Suite("PostgreSQL values round-trip")
struct ValueTests {
    static let database = Task { try await TestDatabase.makePool() }
    var pool: PostgresPool { get async throws { try await Self.database.value } }

    @Test("text parameters keep quotes, backslashes and SQL-looking content intact")
    func quotes() async throws {
        let nasty = #"O'Brien "quoted" \backslash\ '; DROP TABLE users; --"#
        let rows = try await pool.query("SELECT $1::text, length($1::text)", [nasty])
        #expect(try rows[0].decode(String.self, at: 0) == nasty)
        #expect(try rows[0].decode(Int.self, at: 1) == nasty.count)
    }

    @Test("unicode survives: combining marks, emoji, RTL, astral planes")
    func unicode() async throws {
        for text in ["Zoë", "🎵🎶 playlist", "مرحبا", "𝕳𝖊𝖑𝖑𝖔", "e\u{301}", "\u{FEFF}bom", "日本語のテキスト"] {
            let rows = try await pool.query("SELECT $1::text", [text])
            #expect(try rows[0].decode(String.self, at: 0) == text)
        }
    }

    @Test("a NUL byte in a text parameter is a clear error, not a crash or a silent truncation")
    func nulByte() async throws {
        let error = await #expect(throws: PostgresError.self) {
            try await pool.query("SELECT $1::text", ["before\u{0}after"])
        }
        #expect(error?.code == .invalidParameter)
        #expect(error?.message.contains("NUL") == true)
        #expect(error?.message.contains("$1") == true)
        // The connection is still fine afterwards.
        #expect(try await pool.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
    }

    @Test("bytea carries any byte, NUL included, in both directions")
    func bytes() async throws {
        let bytes: [UInt8] = [0, 1, 2, 0, 255, 254, 0x5c, 0x27, 0]
        let rows = try await pool.query("SELECT $1::bytea, length($1::bytea)", [PostgresBytes(bytes)])
        #expect(try rows[0].decode(PostgresBytes.self, at: 0).bytes == bytes)
        #expect(try rows[0].decode(Int.self, at: 1) == bytes.count)
        #expect(try rows[0].decode(Data.self, at: 0) == Data(bytes))
    }

    @Test("large values: a 10 MB text and a 5 MB bytea (also over TLS: many records, more than a socket buffer holds)", arguments: [false, true])
    func largeValues(tls: Bool) async throws {
        let pool = tls ? try await TLSTests.pool() : try await self.pool
        defer { if tls { Task { await pool.close() } } }
        let big = String(repeating: "ab€", count: 10_000_000 / 5)
        let rows = try await pool.query("SELECT $1::text, md5($1::text)", [big])
        #expect(try rows[0].decode(String.self, at: 0) == big)
        let blob = PostgresBytes((0..<5_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        #expect(try await pool.query("SELECT $1::bytea", [blob])[0].decode(PostgresBytes.self, at: 0) == blob)
    }

    @Test("every supported type decodes, and NULL decodes as nil")
    func everyType() async throws {
        let uuid = UUID()
        let rows = try await pool.query(
            """
            SELECT $1::int2, $2::int4, $3::int8, true, false, 3.25::float8, 12345678901234567890.123456789::numeric,
                   $4::uuid, '2024-02-29 13:14:15.123456+00'::timestamptz, '{"a": [1, "x", null]}'::jsonb,
                   '[1,2]'::json, 'text'::varchar, NULL::int8, NULL::text, NULL::uuid, '\\x00ff'::bytea,
                   '1.5'::numeric, 'NaN'::float8
            """, [Int16(-32768), Int32(2_147_483_647), Int64.min, uuid])
        let row = rows[0]
        #expect(try row.decode(Int16.self, at: 0) == -32768)
        #expect(try row.decode(Int32.self, at: 1) == 2_147_483_647)
        #expect(try row.decode(Int64.self, at: 2) == Int64.min)
        #expect(try row.decode(Bool.self, at: 3) == true)
        #expect(try row.decode(Bool.self, at: 4) == false)
        #expect(try row.decode(Double.self, at: 5) == 3.25)
        // Beyond Decimal's 38 digits? No: 29 digits fits. Also readable as exact text.
        #expect(try row.decode(Decimal.self, at: 6) == Decimal(string: "12345678901234567890.123456789"))
        #expect(try row.decode(String.self, at: 6) == "12345678901234567890.123456789")
        #expect(try row.decode(UUID.self, at: 7) == uuid)
        let date = try row.decode(Date.self, at: 8)
        #expect(abs(date.timeIntervalSince1970 - 1_709_212_455.123456) < 0.000_001)
        #expect(try row.decode(PostgresJSON.self, at: 9).text == #"{"a": [1, "x", null]}"#)
        #expect(try row.decode(PostgresJSON.self, at: 10).text == "[1,2]")
        #expect(try row.decode(String.self, at: 11) == "text")
        #expect(try row.decode(Int64?.self, at: 12) == nil)
        #expect(try row.decode(String?.self, at: 13) == nil)
        #expect(try row.decode(UUID?.self, at: 14) == nil)
        #expect(row.isNull(at: 12))
        #expect(try row.decode(PostgresBytes.self, at: 15).bytes == [0, 255])
        #expect(try row.decode(Decimal.self, at: 16) == Decimal(string: "1.5"))
        #expect(try row.decode(Double.self, at: 17).isNaN)
    }

    @Test("decoding NULL into a non-optional, or a type into the wrong Swift type, is a clear error")
    func decodingErrors() async throws {
        let rows = try await pool.query("SELECT NULL::int4 AS missing, 'abc'::text AS word, 3000000000::int8 AS big")
        let nullError = #expect(throws: PostgresError.self) { try rows[0].decode(Int.self, at: 0) }
        #expect(nullError?.code == .decoding)
        #expect(nullError?.message.contains("missing") == true)
        #expect(nullError?.message.contains("NULL") == true)
        #expect(throws: PostgresError.self) { try rows[0].decode(Int.self, named: "word") }
        #expect(throws: PostgresError.self) { try rows[0].decode(Int32.self, named: "big") }
        #expect(try rows[0].decode(Int64.self, named: "big") == 3_000_000_000)
        let unknown = #expect(throws: PostgresError.self) { try rows[0].decode(Int.self, named: "nope") }
        #expect(unknown?.message == "no column named 'nope' (columns: missing, word, big)")
        let outside = #expect(throws: PostgresError.self) { try rows[0].decode(Int.self, at: 3) }
        #expect(outside?.message == "column index 3 out of range (3 columns)")
        #expect(throws: PostgresError.self) { try rows[0].decode(Int.self, at: -1) }
        // Names and types are read from the result when asked: a name differing only in case,
        // or a prefix of one, is another name.
        #expect(rows.columns == ["missing", "word", "big"])
        #expect(rows.columnCount == 3)
        #expect(try rows.columnIndex("big") == 2)
        #expect(throws: PostgresError.self) { try rows.columnIndex("BIG") }
        #expect(throws: PostgresError.self) { try rows.columnIndex("wor") }
        #expect(throws: PostgresError.self) { try rows.columnIndex("big\u{0}x") }
        let empty = try await pool.query("SELECT 1 WHERE false")
        #expect(empty.isEmpty && empty.columns == ["?column?"])
    }

    @Test("UUID text is read as Foundation reads it and written lowercase; a uuid column round-trips")
    func uuidText() async throws {
        var samples = (0..<200).map { _ in UUID().uuidString }
        samples += samples.map { $0.lowercased() }
        samples += [
            "00000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "aBcDeF01-2345-6789-AbCd-Ef0123456789",
            "", "0", "00000000-0000-0000-0000-00000000000", "00000000-0000-0000-0000-0000000000000",
            "00000000000000000000000000000000", "00000000-0000-0000-0000_000000000000", "0000000-00000-0000-0000-000000000000",
            "g0000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-00000000000G",
            "{00000000-0000-0000-0000-000000000000}", "00000000-0000-0000-0000-00000000000é", "00000000-0000-0000-0000-0000000000١",
            "00000000-0000-0000-0000-0000000000:0", "00000000-0000-0000-0000-0000000000/0", "00000000-0000-0000-0000-0000000000@0",
            "00000000-0000-0000-0000-0000000000`0", "00000000-0000-0000-0000-0000000000\u{0}0",
        ]
        for text in samples {
            #expect(UUID(canonical: text) == UUID(uuidString: text), "\(text)")
            if let uuid = UUID(uuidString: text) { #expect(uuid.lowercased == uuid.uuidString.lowercased()) }
        }
        // Foundation parses with sscanf, which lets a group start with a space, a sign or 0x;
        // only the canonical form is an id here.
        for text in [
            " 0000000-0000-0000-0000-000000000000", "00000000- 000-0000-0000-000000000000", "+0000000-0000-0000-0000-000000000000",
            "-0000000-0000-0000-0000-000000000000", "0x000000-0000-0000-0000-000000000000",
        ] {
            #expect(UUID(uuidString: text) != nil && UUID(canonical: text) == nil, "\(text)")
        }
        let id = UUID()
        let rows = try await pool.query("SELECT $1::uuid, $1::uuid::text, upper($1::uuid::text), 'not-a-uuid-but-36-characters-long-xx'", [id])
        #expect(try rows[0].decode(UUID.self, at: 0) == id)
        #expect(try rows[0].decode(String.self, at: 1) == id.lowercased)
        #expect(try rows[0].decode(UUID.self, at: 2) == id, "a text column in capitals reads too")
        #expect(throws: PostgresError.self) { try rows[0].decode(UUID.self, at: 3) }
        // As a parameter a UUID is its lowercase text (written into the statement's buffer, no
        // string made), laid out between other values and read where text is expected.
        let other = UUID()
        let mixed = try await pool.query("SELECT $1::text, $2, $3, $4::text = $1::text", [id, "between", other, id])
        #expect(try mixed[0].decode(String.self, at: 0) == id.lowercased)
        #expect(try mixed[0].decode(String.self, at: 1) == "between")
        #expect(try mixed[0].decode(String.self, at: 2) == other.lowercased, "an untyped parameter is text")
        #expect(try mixed[0].decode(Bool.self, at: 3))
    }

    @Test("dates round-trip at microsecond precision, before and after 1970")
    func dates() async throws {
        // Up to the last second of year 9999, and 40 random instants from 1906 to 2096.
        let random = (0..<40).map { _ in Double(Int.random(in: -2_000_000_000...4_000_000_000)) + Double(Int.random(in: 0..<1_000_000)) / 1e6 }
        for seconds in [0.0, 1_700_000_000.654321, -86_400.5, 4_102_444_800.000001, 253_402_300_799.5] + random {
            let date = Date(timeIntervalSince1970: seconds)
            let back = try await pool.query("SELECT $1::timestamptz", [date])[0].decode(Date.self, at: 0)
            #expect(abs(back.timeIntervalSince1970 - seconds) < 0.000_002, "\(seconds)")
        }
        // Past year 9999 the year takes a fifth digit (read back as text: the decoder reads four).
        let far = Date(timeIntervalSince1970: 253_402_300_800.5)
        #expect(try await pool.query("SELECT $1::timestamptz = '10000-01-01 00:00:00.5+00'", [far])[0].decode(Bool.self, at: 0))
        // Written into the statement's buffer with room for the longest form: the values after a
        // shorter one start where it ends, and a year of three digits is written with four.
        let early = Date(timeIntervalSince1970: -30_627_504_000)  // 0999-06-15
        let mixed = try await pool.query(
            "SELECT $1::timestamptz::text, $2, $3::timestamptz = '10000-01-01 00:00:00.5+00', $4::timestamptz::text",
            [Date(timeIntervalSince1970: 0), "after", far, early])
        #expect(try mixed[0].decode(String.self, at: 0) == "1970-01-01 00:00:00+00")
        #expect(try mixed[0].decode(String.self, at: 1) == "after")
        #expect(try mixed[0].decode(Bool.self, at: 2))
        #expect(try mixed[0].decode(String.self, at: 3) == "0999-06-15 00:00:00+00")
    }

    @Test("server errors carry SQLSTATE, message, detail and constraint")
    func serverError() async throws {
        try await pool.query("CREATE TABLE uniq (id int PRIMARY KEY)")
        try await pool.query("INSERT INTO uniq VALUES (1)")
        let error = await #expect(throws: PostgresError.self) { try await pool.query("INSERT INTO uniq VALUES ($1)", [1]) }
        #expect(error?.code == .server)
        #expect(error?.sqlState == "23505")
        #expect(error?.isUniqueViolation == true)
        #expect(error?.detail?.contains("(id)=(1)") == true)
        #expect(error?.constraint == "uniq_pkey")
        #expect(error?.isRetryable == false)
        let syntax = await #expect(throws: PostgresError.self) { try await pool.query("SELEC 1") }
        #expect(syntax?.sqlState == "42601")
    }
}
