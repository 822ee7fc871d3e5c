import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// `HTTP1ToHTTPServerCodec` (NIO's conversion between HTTP/1 parts and `HTTPTypes`, which
/// Hummingbird's HTTP/1 channel uses) with one shortcut: a request target in origin form (it
/// starts with `/`, as every client sends it except to a proxy) becomes the request's path as
/// it stands.
///
/// The codec parses every target with Foundation's `URLComponents` to find an absolute form's
/// path, and for a target that starts with `/` that parse finds no scheme and gives the target
/// back unchanged: 0.7–0.9 % of a command's CPU profile (`requestPath` with the parse in it)
/// spent to learn nothing (docs/benchmarks.md, "Header lookups, JSON strings and request
/// targets"). Any other target (`http://host/path`, `*`, a `CONNECT`'s authority) goes through
/// the codec's own conversion, as do the fields, the method and the whole response side, so
/// what a handler sees is what it saw before. Hummingbird 2 builds its codec with
/// `secure: false` and no cookie splitting (`HTTP1Channel.setup`,
/// `HTTP1ToHTTPServerCodec(secure: false)`), and so does this; `OriginFormCodecTests` feeds the
/// same parts through both.
final class OriginFormCodec: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            do {
                context.fireChannelRead(wrapInboundOut(.head(try Self.request(head))))
            } catch {
                context.fireErrorCaught(error)
            }
        case .body(let body):
            context.fireChannelRead(wrapInboundOut(.body(body)))
        case .end(let trailers):
            context.fireChannelRead(wrapInboundOut(.end(trailers.map { HTTPFields($0, splitCookie: false) })))
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let response):
            context.write(wrapOutboundOut(.head(HTTPResponseHead(response))), promise: promise)
        case .body(let body):
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: promise)
        case .end(let trailers):
            context.write(wrapOutboundOut(.end(trailers.map(HTTPHeaders.init))), promise: promise)
        }
    }

    /// The request a head stands for, as `HTTPRequest(head, secure: false, splitCookie: false)`
    /// makes it.
    static func request(_ head: HTTPRequestHead) throws -> HTTPRequest {
        guard head.uri.utf8.first == UInt8(ascii: "/") else { return try HTTPRequest(head, secure: false, splitCookie: false) }
        return HTTPRequest(
            method: try HTTPRequest.Method(head.method), scheme: "http", authority: head.headers.first(name: "Host"),
            path: head.uri, headerFields: HTTPFields(head.headers, splitCookie: false))
    }
}

@available(*, unavailable)
extension OriginFormCodec: Sendable {}
