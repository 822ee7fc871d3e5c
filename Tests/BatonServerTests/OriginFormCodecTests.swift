import Foundation
import HTTPTypes
import NIOHTTP1
import NIOHTTPTypesHTTP1
import Testing

@testable import BatonServer

/// ``OriginFormCodec`` makes the same request of a head as NIO's `HTTP1ToHTTPServerCodec`
/// (which it replaces in Baton's HTTP/1 channel), only without parsing an origin-form target.
@Suite("Request targets")
struct OriginFormCodecTests {
    static let corpora = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/corpora")

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

    @Test("every target, method and field set converts as HTTP1ToHTTPServerCodec converts it")
    func sameAsNIO() throws {
        let targets = try Self.targets()
        #expect(targets.count > 600)
        var originForm = 0
        for target in targets {
            for method in [HTTPMethod.GET, .POST, .CONNECT, .OPTIONS, .RAW(value: "BREW")] {
                var head = HTTPRequestHead(version: .http1_1, method: method, uri: target)
                head.headers.add(name: "Host", value: "baton.example")
                head.headers.add(name: "Cookie", value: "a=1; b=2")
                head.headers.add(name: "Connection", value: "keep-alive")
                head.headers.add(name: "X-Client-Platform", value: "ios")
                let theirs = Result { try HTTPRequest(head, secure: false, splitCookie: false) }
                let ours = Result { try OriginFormCodec.request(head) }
                switch (theirs, ours) {
                case (.success(let a), .success(let b)): #expect(a == b, "\(method) \(target.debugDescription)")
                case (.failure, .failure): break
                default: Issue.record("\(method) \(target.debugDescription): NIO \(theirs), ours \(ours)")
                }
            }
            if target.hasPrefix("/") { originForm += 1 }
        }
        #expect(originForm > 500, "the shortcut is what most of these exercise")
    }
}
