import BatonTestSupport
import Foundation
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import Testing

@testable import BatonServer

/// ``OriginFormCodec`` makes the same request of a head as NIO's `HTTP1ToHTTPServerCodec`
/// (which it replaces in Baton's HTTP/1 channel), only without parsing an origin-form target,
/// and passes every other part as that codec does.
@Suite("Request targets")
struct OriginFormCodecTests {
    static let corpora = TestDatabase.corpora

    /// Targets as odd as a client or an attacker sends them: hand-picked, the open-redirect
    /// payloads (each also behind a `/`), and the naughty strings behind a `/`.
    static func targets() throws -> [String] {
        let handPicked = [
            "/", "/healthz", "/v3/command?x=1&y=%20", "//evil.example/x", "/%zz", "/a b", "/caf\u{E9}", "/a#frag",
            "/..;/x", "/?", "/#", "http://x/healthz?a=b", "https://x:8443/", "http://x", "*", "x:443", "", "?a", "%2F",
            "javascript:alert(1)", "/\\evil", "/\u{0}",
        ]
        let payloads = try String(
            decoding: Data(contentsOf: corpora.appendingPathComponent("open-redirect/payloadsallthethings/Open-Redirect-payloads.txt")),
            as: UTF8.self
        ).split(separator: "\n").map(String.init)
        let naughty = try String(decoding: Data(contentsOf: corpora.appendingPathComponent("user-input/blns/blns.txt")), as: UTF8.self)
            .split(separator: "\n").filter { !$0.hasPrefix("#") }.map { "/" + $0 }
        return handPicked + payloads + payloads.map { "/" + $0 } + naughty
    }

    /// Field sets that decide the authority and the fields: the usual, none, a lower-case
    /// `host`, two `Host` lines, two `Cookie` lines.
    static let fieldSets: [[(String, String)]] = [
        [("Host", "baton.example"), ("Cookie", "a=1; b=2"), ("Connection", "keep-alive"), ("X-Client-Platform", "ios")],
        [],
        [("host", "baton.example:8080")],
        [("Host", "one.example"), ("Host", "two.example")],
        [("Host", "baton.example"), ("Cookie", "a=1"), ("Cookie", "b=2"), ("Transfer-Encoding", "chunked")],
    ]

    @Test("every target, with methods and field sets that matter, converts as HTTP1ToHTTPServerCodec converts it")
    func sameAsNIO() throws {
        let targets = try Self.targets()
        #expect(targets.count > 600)
        var (originForm, refused) = (0, 0)
        for target in targets {
            for method in [HTTPMethod.GET, .POST, .CONNECT, .OPTIONS, .RAW(value: "BREW"), .RAW(value: "NOT A METHOD")] {
                for fields in Self.fieldSets {
                    var head = HTTPRequestHead(version: .http1_1, method: method, uri: target)
                    for (name, value) in fields { head.headers.add(name: name, value: value) }
                    let theirs = Result { try HTTPRequest(head, secure: false, splitCookie: false) }
                    let ours = Result { try OriginFormCodec.request(head) }
                    switch (theirs, ours) {
                    case (.success(let a), .success(let b)): #expect(a == b, "\(method) \(target.debugDescription) \(fields)")
                    case (.failure(let a), .failure(let b)):
                        refused += 1
                        #expect("\(a)" == "\(b)", "\(method) \(target.debugDescription)")
                    default: Issue.record("\(method) \(target.debugDescription) \(fields): NIO \(theirs), ours \(ours)")
                    }
                }
            }
            if target.hasPrefix("/") { originForm += 1 }
        }
        #expect(originForm > 500, "the shortcut is what most of these exercise")
        #expect(refused > 0, "a method HTTPTypes refuses is refused the same way")
    }

    /// What a channel with `handler` passes on: each inbound part as read, each outbound part
    /// as written.
    static func through(
        _ handler: any ChannelHandler, reading inbound: [HTTPServerRequestPart], writing outbound: [HTTPResponsePart]
    ) throws -> (read: [HTTPRequestPart], written: [HTTPServerResponsePart], errors: [String]) {
        let channel = EmbeddedChannel()
        final class Errors: ChannelInboundHandler, @unchecked Sendable {
            typealias InboundIn = HTTPRequestPart
            var seen: [String] = []
            func errorCaught(context: ChannelHandlerContext, error: any Error) { seen.append("\(error)") }
        }
        let errors = Errors()
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.pipeline.syncOperations.addHandler(errors)
        var read: [HTTPRequestPart] = []
        for part in inbound {
            try channel.writeInbound(part)
            while let out = try channel.readInbound(as: HTTPRequestPart.self) { read.append(out) }
        }
        var written: [HTTPServerResponsePart] = []
        for part in outbound {
            try channel.writeOutbound(part)
            while let out = try channel.readOutbound(as: HTTPServerResponsePart.self) { written.append(out) }
        }
        _ = try channel.finish()
        return (read, written, errors.seen)
    }

    @Test("the handler passes heads, bodies, trailers, refusals and the response side as NIO's codec does")
    func handlerSameAsNIO() throws {
        var trailers = HTTPHeaders()
        trailers.add(name: "X-Checksum", value: "abc")
        trailers.add(name: "Cookie", value: "a=1; b=2")
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v3/command?x=1")
        head.headers.add(name: "Host", value: "baton.example")
        let inbound: [HTTPServerRequestPart] = [
            .head(head), .body(ByteBuffer(string: "{}")), .end(trailers),
            .head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "http://x/healthz")), .end(nil),
            .head(HTTPRequestHead(version: .http1_1, method: .RAW(value: "NOT A METHOD"), uri: "/")), .end(nil),
        ]
        var response = HTTPResponse(status: .ok)
        response.headerFields[.contentType] = "application/json"
        let outbound: [HTTPResponsePart] = [
            .head(response), .body(ByteBuffer(string: "{\"type\":\"done\"}")), .end([.init("X-Checksum")!: "abc"]), .end(nil),
        ]
        let ours = try Self.through(OriginFormCodec(), reading: inbound, writing: outbound)
        let theirs = try Self.through(HTTP1ToHTTPServerCodec(secure: false), reading: inbound, writing: outbound)
        #expect(ours.read == theirs.read)
        #expect(ours.read.count == 6, "three heads but one refused, three ends, one body")
        #expect(ours.written == theirs.written)
        #expect(ours.written.count == 4)
        #expect(ours.errors == theirs.errors)
        #expect(ours.errors.count == 1, "the refused method")
    }
}
