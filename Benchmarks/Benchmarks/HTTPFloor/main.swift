// The HTTP floor: a server that answers every request with the same fixed body and does nothing
// else, to set beside `baton serve` under the same load (Benchmarks/e2e/http-floor.sh). What a
// request costs it is what the HTTP stack alone costs on this machine: the rest of Baton's CPU
// per request is Baton's.
//
//   baton-http-floor nio|hummingbird --port 8090 [--body-bytes 2]
//
// nio          NIO's HTTP/1 server pipeline and one channel handler that writes the answer on the
//              event loop: no Swift concurrency, no router.
// hummingbird  Hummingbird 2 with one route and nothing else (its default HTTP/1 channel, no
//              middleware), its tasks on NIO's event loops as in `baton serve`.
//
// Both run on NIO's singleton event loop group (one loop per core), as Baton does.
import BatonExecutor
import Hummingbird
import NIOCore
import NIOHTTP1
import NIOPosix

// Jobs on the event loops as the generic executor, as in `baton serve` (Sources/baton/main.swift).
_ = EventLoopGlobalExecutor.mode

var arguments = CommandLine.arguments.dropFirst()
guard let kind = arguments.popFirst(), ["nio", "hummingbird"].contains(kind) else {
    print("usage: baton-http-floor nio|hummingbird --port 8090 [--body-bytes 2]")
    exit(2)
}
var port = 8090
var bodyBytes = 2
while let name = arguments.popFirst() {
    guard let value = arguments.popFirst().flatMap({ Int($0) }), value >= 0 else {
        print("\(name) needs a whole number")
        exit(2)
    }
    switch name {
    case "--port": port = value
    case "--body-bytes": bodyBytes = value
    default:
        print("unknown option \(name)")
        exit(2)
    }
}
// A JSON body of the size asked for: {} for 2 bytes, else a string padded to it.
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

    init(body: ByteBuffer) { self.body = body }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            keepAlive = head.isKeepAlive
        case .body:
            break
        case .end:
            var head = HTTPResponseHead(version: .http1_1, status: .ok)
            head.headers.add(name: "Content-Type", value: "application/json")
            head.headers.add(name: "Content-Length", value: String(body.readableBytes))
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
    router.get("/**") { _, _ in
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
    }
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
    print("baton-http-floor hummingbird on 127.0.0.1:\(port), \(body.readableBytes)-byte body")
    try await app.runService()
}
