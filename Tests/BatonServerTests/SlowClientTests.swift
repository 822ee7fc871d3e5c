import BatonJSON
import BatonServer
import BatonTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// The request deadline and the idle timeout on a live server: what reaches the client over a
/// real connection when a handler, or the client itself, is too slow.
@Suite("Slow handlers and slow clients on a live server")
struct SlowClientTests {
    /// A live application serving the test flows, whose request deadline is one second (the
    /// database's must be shorter, the idle timeout longer).
    func application(idle: Duration = .seconds(75)) async throws -> some ApplicationProtocol {
        buildApplication(
            try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry(), configure: {
                $0.requestTimeout = .seconds(1)
                $0.databaseTimeout = .milliseconds(900)
                $0.idleTimeout = idle
            }))
    }


    @Test("a handler still running at the deadline answers 503 unavailable with Retry-After and the envelope, and the connection serves the next request")
    func handlerPastDeadline() async throws {
        try await application().test(.live) { client in
            let started = ContinuousClock.now
            try await client.execute(uri: "/diagnostics/sleep?ms=10000", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(response.headers[.retryAfter] != nil)
                #expect(response.json["error"]?["code"] == "unavailable")
            }
            #expect(ContinuousClock.now - started < .seconds(8), "answered at the deadline, not after the handler's 10 s")
            try await client.execute(uri: "/healthz", method: .get) { response in #expect(response.status == .ok) }
        }
    }

    /// A request whose body stops arriving, named for the test's report.
    struct StalledUpload: CustomTestStringConvertible, Sendable {
        let testDescription: String
        let bytes: [UInt8]
        init(_ what: String, _ text: String) { (testDescription, bytes) = (what, Array(text.utf8)) }
    }

    @Test(
        "a body that stops arriving is 408 request_timeout with the envelope at the deadline, and the connection closes",
        arguments: [
            StalledUpload(
                "10 of 1000 promised bytes",
                "POST /v3/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"payload\":"),
            StalledUpload(
                "a chunked body without its last chunk",
                "POST /v3/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"pay\r\n"),
        ])
    func stalledUpload(_ upload: StalledUpload) async throws {
        try await application().test(.live) { client in
            let port = try #require(client.port)
            let started = ContinuousClock.now
            let bytes = try #require(await Loopback.exchange(port: port, sending: upload.bytes), "the server kept the connection open")
            #expect(ContinuousClock.now - started < .seconds(8))
            let answer = try #require(Loopback.Answer(bytes), "no answer before the connection closed: \(String(decoding: bytes, as: UTF8.self))")
            #expect(answer.status.hasPrefix("http/1.1 408 "), "\(answer.status)")
            #expect(answer.fields.contains("connection: close"), "\(answer.fields)")
            #expect(answer.fields.contains("content-type: application/json; charset=utf-8"), "\(answer.fields)")
            #expect(answer.code == "request_timeout", "\(answer.body)")
            try await client.execute(uri: "/healthz", method: .get) { response in #expect(response.status == .ok) }
        }
    }

    /// An upload the server refuses as soon as it reads the head, and what is expected of it.
    struct RefusedUpload: CustomTestStringConvertible, Sendable {
        let testDescription: String
        let head: String
        let status: Int
        let code: String
        /// The `baton_http_refused_total` line the refusal leaves.
        let counted: String
        /// The server shuts its sending side with the answer (Hummingbird does after a refusal of
        /// the head): the upload then runs until the reset.
        let endOfStreamFirst: Bool
        /// The body is sent in chunks (`Transfer-Encoding: chunked`), no length announced.
        var chunked = false

        var chunk: [UInt8] {
            let spaces = [UInt8](repeating: 0x20, count: 65_536)
            return chunked ? Array("10000\r\n".utf8) + spaces + Array("\r\n".utf8) : spaces
        }
    }

    @Test(
        "an upload refused on its head gets its answer with Connection: close; what the client sends after it is dropped, and the connection ends 2 s later, not at once",
        arguments: [
            RefusedUpload(
                testDescription: "over the body limit: 413",
                head: "POST /v3/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000000\r\n\r\n",
                // The close cut a body mid-way: not a refusal of the client's.
                status: 413, code: "body_too_large", counted: "baton_http_refused_total{reason=\"truncated\"} 0", endOfStreamFirst: false),
            RefusedUpload(
                testDescription: "without Host: 400",
                head: "POST /v3/command HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100000000000\r\n\r\n",
                status: 400, code: "invalid_request", counted: "baton_http_refused_total{reason=\"host\"} 1", endOfStreamFirst: true),
            // Answered without the body being read: the rest is not taken either.
            RefusedUpload(
                testDescription: "a chunked body to no route: 404",
                head: "POST /v3/nope HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
                status: 404, code: "not_found", counted: "baton_http_refused_total{reason=\"truncated\"} 0", endOfStreamFirst: false,
                chunked: true),
            RefusedUpload(
                testDescription: "a chunked body from a device whose id is not a UUID: 400",
                head: "POST /v3/command HTTP/1.1\r\nHost: x\r\nX-Device-Id: not-a-uuid\r\nContent-Type: application/json\r\n"
                    + "Transfer-Encoding: chunked\r\n\r\n",
                status: 400, code: "invalid_request", counted: "baton_http_refused_total{reason=\"truncated\"} 0", endOfStreamFirst: false,
                chunked: true),
        ])
    func refusedUpload(_ refused: RefusedUpload) async throws {
        try await application().test(.live) { client in
            let port = try #require(client.port)
            let upload = try #require(
                await Loopback.upload(
                    port: port, head: Array(refused.head.utf8), chunk: refused.chunk, seconds: 12,
                    throughEndOfStream: refused.endOfStreamFirst))
            let answer = try #require(Loopback.Answer(upload.answer), "no answer: \(String(decoding: upload.answer, as: UTF8.self))")
            #expect(answer.status.hasPrefix("http/1.1 \(refused.status) "), "\(answer.status)")
            #expect(answer.fields.contains("connection: close"), "\(answer.fields)")
            #expect(answer.code == refused.code, "\(answer.body)")
            let (ended, after, sent) = (upload.ended, upload.endedAfterAnswer, upload.sentAfterAnswer)
            #expect(ended, "the server still took the body after 12 s")
            // The linger (2 s), not at once and not the idle timeout; a busy machine only delays.
            // Closed at once, the socket is reset, and the reset can destroy the answer before
            // the client reads it.
            if let after { #expect(after >= .milliseconds(1500) && after < .seconds(8), "closed \(after) after the answer, \(sent) bytes sent after it") }
            // Far more than the sockets' buffers hold: the server went on reading, and dropped it.
            #expect(sent > 4 << 20, "only \(sent) bytes sent after the answer")
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(refused.counted), "\(refused.counted)")
        }
    }

    @Test("a request pipelined behind an over-limit body is not served: one answer, the 413, and the connection closes")
    func pipelinedAfterOversizedBody() async throws {
        try await application().test(.live) { client in
            let port = try #require(client.port)
            // The second request is a command: served, it would fail loudly (no payload) with a second answer.
            // Large enough to be still arriving when the 413 (sent on seeing the length) is written.
            let oversized = "POST /v3/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20000000\r\n\r\n"
                + String(repeating: " ", count: 20_000_000)
            let next = "POST /v3/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            let bytes = try #require(await Loopback.exchange(port: port, sending: Array((oversized + next).utf8)), "the connection was left open")
            #expect(Loopback.Answer.all(bytes).map(\.statusCode) == [413], "\(String(decoding: bytes, as: UTF8.self))")
        }
    }

    @Test("a chunked body (no length announced) over the limit is 413 body_too_large with the envelope, not a 500, and the connection closes")
    func chunkedOversizedBody() async throws {
        try await application().test(.live) { client in
            let port = try #require(client.port)
            let chunk = "400\r\n" + String(repeating: " ", count: 1024) + "\r\n"
            let oversized = "POST /v3/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                + String(repeating: chunk, count: 70) + "0\r\n\r\n"
            let next = "POST /v3/command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            let bytes = try #require(await Loopback.exchange(port: port, sending: Array((oversized + next).utf8)), "the connection was left open")
            let answers = Loopback.Answer.all(bytes)
            #expect(answers.map(\.statusCode) == [413], "\(String(decoding: bytes, as: UTF8.self))")
            #expect(String(decoding: bytes, as: UTF8.self).contains(#""code":"body_too_large""#))
        }
    }

    @Test("a client that stops taking its answers has its connection ended after http.idle.timeout, not held for good")
    func clientStopsReading() async throws {
        try await application(idle: .milliseconds(1500)).test(.live) { client in
            let port = try #require(client.port)
            let count = 3000
            let request = Array("GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            let result = try #require(await Loopback.pipelinedUnread(port: port, request: request, count: count, pause: .seconds(5)))
            #expect(result.ended, "the connection was still open")
            #expect(result.answers < count, "the server went on waiting to write: all \(result.answers) answers came once the client read")
        }
    }

    @Test("an idle connection, one that sent half a head and one kept alive after its answer are closed after http.idle.timeout, not before")
    func idleConnections() async throws {
        try await application(idle: .milliseconds(1500)).test(.live) { client in
            let port = try #require(client.port)
            /// What the server wrote before it closed the connection, and how long that took; nil
            /// when it kept the connection open 6 s after its last byte.
            func exchange(_ text: String) async -> (bytes: [UInt8], after: Duration)? {
                let started = ContinuousClock.now
                guard let bytes = await Loopback.exchange(port: port, sending: Array(text.utf8), timeout: 6) else { return nil }
                return (bytes, ContinuousClock.now - started)
            }
            let silent = try #require(await exchange(""), "a connection that never sent a byte was left open")
            #expect(silent.bytes == [])
            let halfHead = try #require(await exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n"), "a connection that sent half a head was left open")
            #expect(halfHead.bytes == [])
            let keptAlive = try #require(await exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), "a kept-alive connection was left open after its answer")
            #expect(Loopback.Answer(keptAlive.bytes)?.status.hasPrefix("http/1.1 200 ") == true)
            // Not before the timeout (a busy machine only makes the close later).
            for after in [silent.after, halfHead.after, keptAlive.after] { #expect(after >= .milliseconds(1400), "closed after \(after)") }
            // A close the server chose is not counted as a client's truncated request. (On a new
            // connection: the test client's own has been idle too long by now, and was closed.)
            let answer = try #require(await exchange("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
            let metrics = try #require(Loopback.Answer(answer.bytes)).body
            #expect(metrics.contains("baton_http_refused_total{reason=\"truncated\"} 0"), "\(metrics.split(separator: "\n").filter { $0.contains("refused") })")
        }
    }
}
