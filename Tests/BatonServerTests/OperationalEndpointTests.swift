import BatonJSON
import BatonPostgres
import BatonServer
import BatonTestSupport
import Foundation
import HummingbirdTesting
import Testing

@Suite("Operational endpoints and error envelopes")
struct OperationalEndpointTests {
    @Test("healthz and readyz answer on a migrated database")
    func health() async throws {
        let app = buildApplication(try await TestApplication.environment())
        try await app.test(.router) { client in
            var ids: [String] = []
            for _ in 0..<2 {
                let response = try await client.execute(uri: "/healthz", method: .get)
                #expect(response.status == .ok)
                #expect(response.json["status"] == "ok")
                ids.append(response.headers[.requestID] ?? "")
            }
            // 32 lowercase hex digits: the process's random prefix, then a counter.
            for id in ids { #expect(id.count == 32 && id.allSatisfy { $0.isHexDigit && !$0.isUppercase }, "\(id)") }
            #expect(ids[0].prefix(16) == ids[1].prefix(16) && ids[0] != ids[1])
            try await client.execute(uri: "/readyz", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.json["checks"]?["database"] == "ok")
                #expect(response.json["checks"]?["migrations"] == "ok")
            }
        }
    }

    @Test("readyz is 503 with the envelope while a migration is pending")
    func notReadyWhenPending() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pending-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for file in try FileManager.default.contentsOfDirectory(atPath: TestDatabase.migrationsDirectory.path) {
            try FileManager.default.copyItem(
                at: TestDatabase.migrationsDirectory.appendingPathComponent(file), to: directory.appendingPathComponent(file))
        }
        try "CREATE TABLE later (id int);".write(to: directory.appendingPathComponent("9999_later.sql"), atomically: true, encoding: .utf8)
        let app = buildApplication(try await TestApplication.environment(migrator: try Migrator(directory: directory)))
        try await app.test(.router) { client in
            try await client.execute(uri: "/readyz", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                let body = response.json
                #expect(body["error"]?["code"] == "unavailable")
                #expect(body["error"]?["message"]?.stringValue?.contains("9999_later") == true)
                #expect(body["error"]?["checks"]?["database"] == "ok")
                #expect(response.headers[.retryAfter] != nil)
            }
        }
    }

    @Test("an unreachable database answers 503 with Retry-After, never 500; the log says libpq's reason")
    func databaseDown() async throws {
        var environment = try await TestApplication.environment(conninfo: "host=127.0.0.1 port=1 connect_timeout=1 dbname=x")
        let log = LogCapture()
        environment.logger = log.logger()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            try await client.execute(uri: "/readyz", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(response.json["error"]?["checks"]?["database"] == "unreachable")
            }
            try await client.execute(uri: "/diagnostics/probe/s1", method: .post) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(response.json["error"]?["code"] == "unavailable")
                #expect(response.headers[.retryAfter] == "2")
            }
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok)
            }
            // Each failed attempt to connect is counted.
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            let failures = metrics.split(separator: "\n").first { $0.hasPrefix("baton_db_pool_connect_failures_total ") }
            #expect(failures.flatMap { Double($0.split(separator: " ")[1]) }.map { $0 >= 1 } == true, "\(failures ?? "no series")")
        }
        // An operator reads why: libpq's message, not only the error's kind.
        let unavailable = log.lines.filter { $0.message == "database unavailable" }
        #expect(!unavailable.isEmpty)
        #expect(unavailable.allSatisfy { $0.metadata["reason"]?.contains("refused") == true }, "\(unavailable.map(\.metadata))")
    }

    @Test("unknown paths are 404 and wrong methods 405 with Allow, both as envelopes")
    func notFoundAndMethodNotAllowed() async throws {
        let app = buildApplication(try await TestApplication.environment())
        try await app.test(.router) { client in
            try await client.execute(uri: "/no/such/thing", method: .get) { response in
                #expect(response.status == .notFound)
                #expect(response.json["error"]?["code"] == "not_found")
                #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
            }
            try await client.execute(uri: "/metrics", method: .delete) { response in
                #expect(response.status == .methodNotAllowed)
                #expect(response.json["error"]?["code"] == "method_not_allowed")
                #expect(response.headers[.allow] == "GET, HEAD")
            }
            try await client.execute(uri: "/diagnostics/probe/abc", method: .get) { response in
                #expect(response.status == .methodNotAllowed)
                #expect(response.headers[.allow] == "POST")
            }
        }
    }

    @Test("the probe's counter at its largest value answers 409 with the envelope, not a crash")
    func probeCounterAtItsLargest() async throws {
        let environment = try await TestApplication.environment()
        try await environment.pool.query("INSERT INTO probe_counters (subject, hits) VALUES ('full', 9223372036854775807)")
        try await buildApplication(environment).test(.router) { client in
            try await client.execute(uri: "/diagnostics/probe/full", method: .post) { response in
                #expect(response.status == .conflict)
                #expect(response.json["error"]?["code"] == "conflict")
            }
        }
    }

    @Test("a body with a Content-Encoding is refused 415 naming it, not read as JSON")
    func contentEncodingRefused() async throws {
        let app = buildApplication(try await TestApplication.environment())
        try await app.test(.router) { client in
            for coding in ["gzip", "br", "identity, gzip", "GZIP"] {
                try await client.execute(
                    uri: "/diagnostics/probe/abc", method: .post, headers: [.contentEncoding: coding, .contentType: "application/json"],
                    body: ByteBuffer(string: "{}")
                ) { response in
                    #expect(response.status == .unsupportedMediaType, "\(coding)")
                    #expect(response.json["error"]?["code"] == "unsupported_media_type")
                    #expect(response.json["error"]?["message"]?.stringValue?.contains(coding) == true)
                    #expect(response.headers[.acceptEncoding] == "identity")
                }
            }
            // No body, nothing to decode: a header alone is not refused.
            #expect(try await client.execute(uri: "/healthz", method: .get, headers: [.contentEncoding: "gzip"]).status == .ok)
            for coding in ["identity", " Identity ", ""] {
                try await client.execute(uri: "/diagnostics/probe/abc", method: .post, headers: [.contentEncoding: coding]) { response in
                    // Through to the probe, which knows no subject "abc".
                    #expect(response.status == .notFound, "\(coding)")
                }
            }
        }
    }

    /// Sends `requests` pipelined on one connection to a live server (the last one asks it to
    /// close) and reads until it closes: the text (for a failure's report) and the answers.
    static func pipelined(_ requests: [String]) async throws -> (text: String, answers: [Loopback.Answer]) {
        let app = buildApplication(try await TestApplication.environment())
        return try await app.test(.live) { client in
            let port = try #require(client.port)
            // 20 s between reads bounds a hang; 5 s ran out once in a loaded parallel pass.
            let bytes = try #require(await Loopback.exchange(port: port, sending: Array(requests.joined().utf8), timeout: 20))
            return (String(decoding: bytes, as: UTF8.self), Loopback.Answer.all(bytes))
        }
    }

    @Test("requests in origin form (with a query) and in absolute form are served through the HTTP/1 pipeline and its codec")
    func requestTargets() async throws {
        let (text, answers) = try await Self.pipelined([
            "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "GET http://x/healthz HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET /healthz?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n", "GET /healthz/nothing HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET http://x/openapi.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ])
        #expect(answers.map(\.statusCode) == [200, 200, 200, 404, 200], "\(text)")
        #expect(answers.last.map { $0.body.count > 1000 } == true, "the document, found by its absolute form's path")
    }

    @Test("HEAD is answered as GET is, with the same Content-Length and no body, on a connection that stays usable")
    func headAnswersAsGet() async throws {
        // Pipelined: a HEAD answer that carried its body would put that body where the next
        // status line must be.
        let (text, answers) = try await Self.pipelined([
            "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
            "HEAD /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n", "HEAD /diagnostics/probe/abc HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ])
        #expect(answers.map(\.statusCode) == [200, 200, 200, 405], "\(text)")
        guard answers.count == 4 else { return }
        #expect(answers[0].body.isEmpty && answers[2].body.isEmpty && answers[3].body.isEmpty, "\(text)")
        #expect(answers[0].field("content-length") == answers[1].field("content-length"))
        #expect(answers[0].field("content-type") == answers[1].field("content-type"))
        #expect(Int(answers[2].field("content-length") ?? "") ?? 0 > 1000, "the document's length, as its GET would send")
        #expect(answers[3].field("allow") == "post", "fields are read lower-cased")
    }

    /// A request NIO's HTTP parser refuses, named for the test's report; a word its answer's
    /// message must carry, and the reason it is counted under.
    struct MalformedRequest: CustomTestStringConvertible, Sendable {
        let testDescription: String
        let bytes: [UInt8]
        let named: String
        let reason: String
        /// The client shuts its sending side after the bytes.
        let halfClose: Bool
        init(_ what: String, _ text: String, names named: String, reason: String, halfClose: Bool = false) {
            (testDescription, bytes, self.named, self.reason, self.halfClose) = (what, Array(text.utf8), named, reason, halfClose)
        }
    }

    @Test(
        "a request the HTTP parser refuses is 400 invalid_request with the envelope, and its connection closes",
        arguments: [
            MalformedRequest(
                "a control character in a header", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Client-Version: \u{1}\r\n\r\n",
                names: "character", reason: "invalid_character"),
            MalformedRequest(
                "a header over 80 KiB",
                "GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(String(repeating: "a", count: 100_000))\r\n\r\n",
                names: "too large", reason: "head_too_large"),
            MalformedRequest("a request line that is not HTTP", "GET /healthz HTTX/1.1\r\nHost: x\r\n\r\n", names: "HTTP", reason: "request_line"),
            // RFC 9112 §3.2: exactly one Host, holding host[:port].
            MalformedRequest("an HTTP/1.1 request without Host", "GET /healthz HTTP/1.1\r\n\r\n", names: "Host", reason: "host"),
            MalformedRequest("two Host lines", "GET /healthz HTTP/1.1\r\nHost: a.example\r\nhost: b.example\r\n\r\n", names: "Host", reason: "host"),
            MalformedRequest("two Host lines alike", "GET /healthz HTTP/1.1\r\nHost: x\r\nHOST: x\r\n\r\n", names: "Host", reason: "host"),
            MalformedRequest("two Host lines on HTTP/1.0", "GET /healthz HTTP/1.0\r\nHost: x\r\nHost: y\r\n\r\n", names: "Host", reason: "host"),
            MalformedRequest("a Host with a space", "GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n", names: "Host", reason: "host"),
            MalformedRequest("a Host with user info", "GET /healthz HTTP/1.1\r\nHost: user@x\r\n\r\n", names: "Host", reason: "host"),
            MalformedRequest("a Host with two ports", "GET /healthz HTTP/1.1\r\nHost: x:80:81\r\n\r\n", names: "Host", reason: "host"),
            MalformedRequest("a Host whose port is not a number", "GET /healthz HTTP/1.1\r\nHost: x:http\r\n\r\n", names: "Host", reason: "host"),
            MalformedRequest("a Host with a broken escape", "GET /healthz HTTP/1.1\r\nHost: x%2\r\n\r\n", names: "Host", reason: "host"),
            MalformedRequest("an unclosed IPv6 Host", "GET /healthz HTTP/1.1\r\nHost: [::1\r\n\r\n", names: "Host", reason: "host"),
            // What follows the refused head is not parsed for the answer: it names the Host.
            MalformedRequest(
                "no Host, then a chunk whose size is not a number",
                "POST /v3/command HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
                names: "Host", reason: "host"),
            // A command's body is not read: the connection closes after the answer.
            MalformedRequest(
                "a command without Host",
                "POST /v3/command HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
                names: "Host", reason: "host"),
            MalformedRequest(
                "a header without a colon", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Client-Platform ios\r\n\r\n", names: "colon", reason: "invalid_character"),
            MalformedRequest(
                "a Content-Length that is not a number",
                "POST /v3/command HTTP/1.1\r\nHost: x\r\nContent-Length: 1e3\r\n\r\n", names: "Content-Length", reason: "content_length"),
            // The head is fine: the route starts, and reading the body fails.
            MalformedRequest(
                "a chunk whose size is not a number",
                "POST /v3/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
                names: "chunk", reason: "chunk_size"),
            // Only chunked frames a body: a coding named before it was dropped unread, and the
            // body was taken as if only chunked had been named.
            MalformedRequest(
                "a transfer coding before chunked",
                "POST /v3/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                names: "Transfer-Encoding", reason: "transfer_encoding"),
            MalformedRequest(
                "an unknown transfer coding on its own line before chunked",
                "POST /v3/command HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: foo\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                names: "Transfer-Encoding", reason: "transfer_encoding"),
            // A client that gives up mid-request and shuts its side (a cancelled upload).
            MalformedRequest(
                "half a head, then the client's side closed", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Client-Platf",
                names: "ended before", reason: "truncated", halfClose: true),
            MalformedRequest(
                "half a body, then the client's side closed",
                "POST /v3/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"payload\":",
                names: "ended before", reason: "truncated", halfClose: true),
        ])
    func malformedHTTP(_ request: MalformedRequest) async throws {
        let app = buildApplication(try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry()))
        try await app.test(.live) { client in
            let port = try #require(client.port)
            let answer = try #require(
                await Loopback.exchange(port: port, sending: request.bytes, halfClose: request.halfClose),
                "no connection, or the server kept it open")
            let reply = try #require(Loopback.Answer(answer), "\(String(decoding: answer, as: UTF8.self))")
            let (fields, body) = (reply.fields, reply.body)
            #expect(reply.status.hasPrefix("http/1.1 400 "), "\(reply.status)")
            #expect(fields.contains("content-type: application/json; charset=utf-8"), "\(fields)")
            #expect(fields.contains("connection: close"), "\(fields)")
            #expect(fields.contains("content-length: \(body.utf8.count)"), "\(fields)")
            let envelope = try JSONValue.parse(Array(body.utf8))
            #expect(reply.code == "invalid_request", "\(body)")
            #expect(envelope["error"]?["message"]?.stringValue?.contains(request.named) == true, "\(body)")
            // The server still answers a well-formed request, and counted the refusal.
            try await client.execute(uri: "/healthz", method: .get) { response in #expect(response.status == .ok) }
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            let counted = metrics.split(separator: "\n").filter { $0.hasPrefix("baton_http_refused_total{") }.map(String.init).sorted()
            let reasons = ["chunk_size", "content_length", "head_too_large", "host", "invalid_character", "other", "request_line", "transfer_encoding", "truncated"]
            #expect(counted == reasons.map { "baton_http_refused_total{reason=\"\($0)\"} \($0 == request.reason ? 1 : 0)" })
        }
    }

    /// The answers to `request`, sent on a connection of its own, given before the server closed
    /// it (fails when it stays open 10 s); and them as text, for messages.
    static func answersBeforeClose(port: Int, sending request: String) async throws -> (answers: [Loopback.Answer], text: String) {
        let answer = try #require(
            await Loopback.exchange(port: port, sending: Array(request.utf8), timeout: 10), "no connection, or the server kept it open")
        return (Loopback.Answer.all(answer), String(decoding: answer, as: UTF8.self))
    }

    @Test(
        "CONNECT is refused with 400 and its connection closed at once: Baton is no proxy",
        arguments: [
            "CONNECT localhost:80 HTTP/1.1\r\nHost: localhost:80\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
            "CONNECT /v3/command HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        ])
    func connectRefused(_ request: String) async throws {
        // NIO's parser takes the bytes after a CONNECT head as a tunnel's and its encoder sends
        // any answer to CONNECT without a body: before, the route's 404 or 405 went out bodiless
        // and unframed, and the request after it was never read, the connection idle for 75 s.
        // The refusal's envelope is lost the same way; the status and the close are what is left.
        let app = buildApplication(try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry()))
        try await app.test(.live) { client in
            let (answers, text) = try await Self.answersBeforeClose(port: try #require(client.port), sending: request)
            #expect(answers.map(\.statusCode) == [400], "\(text)")
            #expect(answers.first?.field("connection") == "close")
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"baton_http_refused_total{reason="request_line"} 1"#))
        }
    }

    @Test(
        "a request NIO's parser reads nothing after (an upgrade, HTTP/1.0 with Transfer-Encoding) is answered and its connection closed, not left to the idle timeout",
        arguments: [
            "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
            "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, UPGRADE\r\nUpgrade: websocket\r\n\r\n",
            "POST /healthz HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "POST /healthz HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nUpgrade: h2c\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ])
    func upgradeClosesAfterItsAnswer(_ request: String) async throws {
        let app = buildApplication(try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry()))
        try await app.test(.live) { client in
            let (answers, text) = try await Self.answersBeforeClose(
                port: try #require(client.port), sending: request + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(answers.count == 1, "\(text)")
            #expect(answers.first?.field("connection") == "close", "\(text)")
        }
    }

    @Test("pipelined requests are answered in order, and garbage after a good request is 400 with the envelope after the good one's 200")
    func pipelined() async throws {
        let app = buildApplication(try await TestApplication.environment())
        try await app.test(.live) { client in
            let port = try #require(client.port)
            let good = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
            let bytes = Array((good + good + "GARBAGE \u{1} NOT HTTP\r\n\r\n").utf8)
            let answer = try #require(await Loopback.exchange(port: port, sending: bytes), "no connection, or the server kept it open")
            let text = String(decoding: answer, as: UTF8.self)
            // Each answer's body ends without a line break: the next status line follows it.
            let answers = Loopback.Answer.all(answer)
            #expect(answers.map(\.statusCode) == [200, 200, 400], "\(text)")
            #expect(answers.last?.code == "invalid_request", "\(text)")
        }
    }

    @Test("every valid Host is served (an HTTP/1.0 request may have none); a request without one is refused after the answers before it")
    func hostHeader() async throws {
        let app = buildApplication(try await TestApplication.environment())
        try await app.test(.live) { client in
            let port = try #require(client.port)
            let valid = [
                "x", "", "baton.example.com:8080", "127.0.0.1", "127.0.0.1:80", "[::1]", "[::1]:8080", "[fe80::1%25eth0]:1",
                "xn--bcher-kva.example", "a%20b", "x:", "sub_domain.example~", "!$&'()*+,;=",
            ]
            let requests = valid.map { "GET /healthz HTTP/1.1\r\nHost: \($0)\r\n\r\n" } + ["GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"]
            let refused = "GET /healthz HTTP/1.1\r\nConnection: keep-alive\r\n\r\n"
            let behind = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
            let answer = try #require(
                await Loopback.exchange(port: port, sending: Array((requests.joined() + refused + behind).utf8)),
                "no connection, or the server kept it open")
            let answers = Loopback.Answer.all(answer)
            // Each valid one served, then the refusal; nothing behind it is read.
            #expect(answers.map(\.statusCode) == Array(repeating: 200, count: requests.count) + [400], "\(String(decoding: answer, as: UTF8.self))")
            #expect(answers.last?.code == "invalid_request")
        }
    }

    struct ClosingRequests: CustomTestStringConvertible, Sendable {
        let testDescription: String
        let bytes: [UInt8]
        /// Each answer's status and `Connection` header (nil: none), in order.
        let answers: [Expected]
        struct Expected: Equatable, Sendable {
            let status: Int
            let connection: String?
        }
        init(_ what: String, _ requests: [String], answers: [(Int, String?)]) {
            (testDescription, bytes) = (what, Array(requests.joined().utf8))
            self.answers = answers.map { Expected(status: $0.0, connection: $0.1) }
        }
    }

    @Test(
        "a request that does not keep its connection is answered with Connection: close, and the connection is closed after it",
        arguments: [
            ClosingRequests("HTTP/1.0 without keep-alive", ["GET /healthz HTTP/1.0\r\n\r\n"], answers: [(200, "close")]),
            ClosingRequests(
                "Connection: Close, capitalised", ["GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n"], answers: [(200, "close")]),
            ClosingRequests(
                "close among other options", ["GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: te, close\r\nTE: trailers\r\n\r\n"],
                answers: [(200, "close")]),
            ClosingRequests(
                "HTTP/1.0 with keep-alive, then without",
                ["GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "GET /healthz HTTP/1.0\r\n\r\n"],
                answers: [(200, "keep-alive"), (200, "close")]),
            ClosingRequests(
                "pipelined: a request, one that closes, and one after it that is not answered",
                [
                    "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                    "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n",
                ],
                answers: [(200, nil), (200, "close")]),
            // Refused before its body is read (this server has no flows: 404); the body is dropped.
            ClosingRequests(
                "a POST that closes, refused before its body is read",
                ["POST /v3/command HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"],
                answers: [(404, "close")]),
            // The 413 closes whatever the request asked.
            ClosingRequests(
                "HTTP/1.0 with keep-alive and a body over the limit",
                ["POST /v3/command HTTP/1.0\r\nConnection: keep-alive\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"],
                answers: [(413, "close")]),
        ])
    func closingRequests(_ requests: ClosingRequests) async throws {
        let app = buildApplication(try await TestApplication.environment())
        try await app.test(.live) { client in
            let port = try #require(client.port)
            // Kept open, the exchange gives up after 5 s and returns nil.
            let exchange = try #require(
                await Loopback.exchangeThenProbe(port: port, sending: requests.bytes, timeout: 5), "the server kept the connection open")
            let text = String(decoding: exchange.answer, as: UTF8.self)
            let answers = Loopback.Answer.all(exchange.answer)
            let seen = answers.map { ClosingRequests.Expected(status: $0.statusCode, connection: $0.field("connection")) }
            #expect(seen == requests.answers, "\(text)")
            #expect(answers.allSatisfy { $0.field("content-length") != nil }, "\(text)")
            // Closed whole, not only its sending side: a client that does not close on the
            // server's end of stream must not hold the socket.
            #expect(exchange.closedWhole, "the server shut its sending side only")
        }
    }

    struct Uploads: CustomTestStringConvertible, Sendable {
        let testDescription: String
        let head: String
        let body: String
        /// `100 Continue` comes before the body is sent.
        let invited: Bool
        /// The final answer's status.
        let status: Int
        init(_ what: String, _ head: String, body: String = "{}", invited: Bool, status: Int) {
            (testDescription, self.head, self.body, self.invited, self.status) = (what, head, body, invited, status)
        }
    }

    @Test(
        "Expect: 100-continue is answered 100 Continue before the body is sent, unless the body would be refused or the client is HTTP/1.0",
        arguments: [
            Uploads(
                "a body within the limit",
                "POST /v3/command HTTP/1.1\r\nHost: x\r\nConnection: close\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n",
                invited: true, status: 404),
            Uploads(
                "a chunked body, Expect capitalised",
                "POST /v3/command HTTP/1.1\r\nHost: x\r\nConnection: close\r\nExpect: 100-Continue\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
                body: "2\r\n{}\r\n0\r\n\r\n", invited: true, status: 404),
            Uploads(
                "a body over the limit: 413 at once",
                "POST /v3/command HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n",
                invited: false, status: 413),
            Uploads(
                "HTTP/1.0",
                "POST /v3/command HTTP/1.0\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n",
                invited: false, status: 404),
            Uploads(
                "no Expect",
                "POST /v3/command HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n",
                invited: false, status: 404),
        ])
    func expectContinue(_ upload: Uploads) async throws {
        let app = buildApplication(try await TestApplication.environment())
        try await app.test(.live) { client in
            let port = try #require(client.port)
            let exchange = try #require(
                await Loopback.exchangeInTwo(port: port, first: Array(upload.head.utf8), wait: .milliseconds(700), second: Array(upload.body.utf8)))
            let before = String(decoding: exchange.beforeSecond, as: UTF8.self)
            #expect(before.hasPrefix("HTTP/1.1 100 Continue\r\n\r\n") == upload.invited, "before the body: \(before)")
            // After the interim answer, if any, one final answer.
            let answers = Loopback.Answer.all(exchange.beforeSecond + exchange.afterSecond).filter { $0.statusCode != 100 }
            let final = try #require(answers.count == 1 ? answers.first : nil, "\(before)|\(String(decoding: exchange.afterSecond, as: UTF8.self))")
            #expect(final.statusCode == upload.status, "\(final.status)")
            #expect(final.code != nil, "\(final.body)")
        }
    }

    @Test("a body over the limit is 413 body_too_large")
    func bodyLimit() async throws {
        let app = buildApplication(try await TestApplication.environment(configure: { $0.bodyLimit = 2048 }))
        try await app.test(.router) { client in
            try await client.execute(
                uri: "/diagnostics/probe/s", method: .post, body: ByteBuffer(repeating: 0x41, count: 4096)
            ) { response in
                #expect(response.status == .contentTooLarge)
                #expect(response.json["error"]?["code"] == "body_too_large")
            }
        }
    }

    @Test("a well-formed X-Request-Id is echoed; a hostile one is replaced")
    func requestID() async throws {
        let app = buildApplication(try await TestApplication.environment())
        try await app.test(.router) { client in
            try await client.execute(uri: "/healthz", method: .get, headers: [.requestID: "abc-123_x.y"]) { response in
                #expect(response.headers[.requestID] == "abc-123_x.y")
            }
            try await client.execute(uri: "/healthz", method: .get, headers: [.requestID: "evil\" level=error"]) { response in
                #expect(response.headers[.requestID] != "evil\" level=error")
                #expect(response.headers[.requestID]?.count == 32)
            }
        }
    }

    @Test("the database-backed probe runs one transaction: lock, update, log")
    func probe() async throws {
        let environment = try await TestApplication.environment()
        try await environment.pool.query("INSERT INTO probe_counters (subject) VALUES ('s1')")
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            for expected in 1...3 {
                try await client.execute(uri: "/diagnostics/probe/s1", method: .post) { response in
                    #expect(response.status == .ok)
                    #expect(response.json["hits"] == .int(expected))
                }
            }
            try await client.execute(uri: "/diagnostics/probe/missing", method: .post) { response in
                #expect(response.status == .notFound)
            }
            // (The pool closes with the application, so look inside the test closure.)
            #expect(try await environment.pool.query("SELECT count(*) FROM probe_log WHERE subject = 's1'")[0].decode(Int.self, at: 0) == 3)
        }
    }

    @Test("a database that takes no writes (a standby after a failover) is 503 unavailable, not 500; its connections are replaced, so writes resume when it takes them")
    func readOnlyDatabase() async throws {
        let conninfo = try await TestDatabase.make(migrated: true)
        let database = try #require(try Conninfo.parse(conninfo)["dbname"])
        var environment = try await TestApplication.environment(conninfo: conninfo, poolSize: 2)
        let log = LogCapture()
        environment.logger = log.logger()
        try await environment.pool.query("INSERT INTO probe_counters (subject) VALUES ('s1')")
        let admin = PostgresPool(configuration: .administrative(conninfo: try await TestDatabase.adminConninfo()))
        defer { Task { await admin.close() } }
        // What a standby answers to a write: 25006, "cannot execute UPDATE in a read-only transaction".
        @Sendable func readOnly(_ on: Bool) async throws {
            try await admin.withConnection { try await $0.execute("ALTER DATABASE \(database) SET default_transaction_read_only = \(on ? "on" : "off")") }
        }
        // A write in a transaction opened read-only on a server that takes writes (a screen's
        // snapshot, a loader that writes) is the caller's mistake: a plain server error, and
        // the connection is kept.
        let (mistake, kept) = try await environment.pool.withConnection { connection in
            try await connection.execute("BEGIN READ ONLY")
            let error = await #expect(throws: PostgresError.self) { try await connection.execute("UPDATE probe_counters SET hits = hits + 1") }
            try await connection.execute("ROLLBACK")
            return (error, !connection.refusedWrite)
        }
        #expect(mistake?.code == .server && mistake?.sqlState == "25006" && mistake?.isUnavailable == false, "\(String(describing: mistake))")
        #expect(kept)
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            try await client.execute(uri: "/diagnostics/probe/s1", method: .post) { #expect($0.status == .ok) }
            try await readOnly(true)
            // The pool's open connections keep the setting they started with: end them, as a
            // failover does.
            try await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [database])
            for _ in 0..<3 {
                try await client.execute(uri: "/diagnostics/probe/s1", method: .post) { response in
                    #expect(response.status == .serviceUnavailable)
                    #expect(response.json["error"]?["code"] == "unavailable")
                    #expect(response.headers[.retryAfter] != nil)
                }
            }
            try await readOnly(false)
            // No connection is ended now: the ones that met the refusal were not kept.
            try await client.execute(uri: "/diagnostics/probe/s1", method: .post) { response in
                #expect(response.status == .ok)
                #expect(response.json["hits"] == .int(2))
            }
        }
        let unavailable = log.lines.filter { $0.message == "database unavailable" }
        #expect(unavailable.count == 3 && unavailable.allSatisfy { $0.metadata["sqlstate"] == "25006" }, "\(unavailable.map(\.metadata))")
    }

    @Test("diagnostics endpoints do not exist unless enabled")
    func diagnosticsOff() async throws {
        let app = buildApplication(try await TestApplication.environment(configure: { $0.diagnostics = false }))
        try await app.test(.router) { client in
            try await client.execute(uri: "/diagnostics/probe/s1", method: .post) { response in
                #expect(response.status == .notFound)
            }
        }
    }
}
