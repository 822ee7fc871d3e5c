// The HTTP floor: a server that answers `GET /healthz` (the nio one: any request) with the same
// fixed body and does nothing else, to set beside `baton serve` under the same load
// (Benchmarks/e2e/http-floor.sh). What a request costs it is what the HTTP stack alone costs on
// this machine: the rest of Baton's CPU per request is Baton's.
//
//   baton-http-floor nio|hummingbird --port 8090 [--body-bytes 2]
//
// nio          NIO's HTTP/1 server pipeline and one channel handler that writes the answer on the
//              event loop: no Swift concurrency, no router.
// hummingbird  Hummingbird 2 with one route, `GET /healthz` (its default HTTP/1 channel, no
//              middleware), its tasks on NIO's event loops as in `baton serve`.
//
// Both run on NIO's singleton event loop group (one loop per core), as Baton does.
import BatonExecutor
import Foundation
import Hummingbird
import NIOCore
import NIOHTTP1
import NIOPosix

/// Says why on standard error and exits with status 2.
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(2)
}

// Jobs on the event loops as the generic executor, as in `baton serve` (Sources/baton/main.swift).
_ = EventLoopGlobalExecutor.mode

var arguments = CommandLine.arguments.dropFirst()
guard let kind = arguments.popFirst(), ["nio", "hummingbird"].contains(kind) else {
    fail("usage: baton-http-floor nio|hummingbird --port 8090 [--body-bytes 2]")
}
var port = 8090
var bodyBytes = 2
while let name = arguments.popFirst() {
    guard let value = arguments.popFirst().flatMap({ Int($0) }), value >= 0 else {
        fail("\(name) needs a whole number")
    }
    switch name {
    case "--port": port = value
    case "--body-bytes": bodyBytes = value
    default:
        fail("unknown option \(name)")
    }
}
// A JSON body of the size asked for: a string padded to it, or `{}` (2 bytes) for any size below 8.
let body: ByteBuffer = {
    let text = bodyBytes < 8 ? "{}" : #"{"a":""# + String(repeating: "x", count: bodyBytes - 8) + #""}"#
    return ByteBuffer(string: text)
}()

/// Answers each request's end with the body; keeps the connection open as the client asks.
final class FloorHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    private let body: ByteBuffer
    private var keepAlive = true
    private var version = HTTPVersion.http1_1

    init(body: ByteBuffer) { self.body = body }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            version = head.version
            keepAlive = head.isKeepAlive
        case .body:
            break
        case .end:
            var head = HTTPResponseHead(version: version, status: .ok)
            head.headers.add(name: "Content-Type", value: "application/json")
            head.headers.add(name: "Content-Length", value: String(body.readableBytes))
            if !keepAlive { head.headers.add(name: "Connection", value: "close") }
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !keepAlive {
                let channel = context.channel
                written.whenComplete { _ in channel.close(promise: nil) }
            }
        }
    }
}

switch kind {
case "nio":
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .serverChannelOption(.backlog, value: 256)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                try channel.pipeline.syncOperations.addHandler(FloorHandler(body: body))
            }
        }
        .bind(host: "127.0.0.1", port: port).get()
    print("baton-http-floor nio on 127.0.0.1:\(port), \(body.readableBytes)-byte body")
    try await channel.closeFuture.get()
default:
    let router = Router()
    router.get("/healthz") { _, _ in
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
    }
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
    print("baton-http-floor hummingbird on 127.0.0.1:\(port), \(body.readableBytes)-byte body")
    try await app.runService()
}
