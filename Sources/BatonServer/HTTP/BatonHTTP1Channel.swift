import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Hummingbird's HTTP/1.1 channel with two handlers more, ``ConnectionPersistence`` and
/// ``ExpectContinue``, placed between NIO's HTTP/1 decoder and `HTTP1ToHTTPServerCodec`: they
/// need the request's HTTP version, which the conversion to `HTTPTypes` drops. Everything else
/// is `HTTP1Channel`'s: its pipeline, its handlers (the `additionalChannelHandlers` of its
/// configuration included) and its request loop.
struct BatonHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let inner: HTTP1Channel
    /// The request body limit (`http.body.limit`): a body announced over it gets no `100 Continue`.
    let bodyLimit: Int

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        // `HTTP1Channel.setup` builds the pipeline on the channel's loop before the channel is
        // registered, so the handlers are in place before the first read.
        inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let codec = try pipeline.handler(type: HTTP1ToHTTPServerCodec.self)
            try pipeline.addHandlers([ConnectionPersistence(), ExpectContinue(bodyLimit: bodyLimit)], position: .before(codec))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 as `.http1(configuration:)` serves it, with ``BatonHTTP1Channel``'s handlers.
    static func batonHTTP1(configuration: HTTP1Channel.Configuration, bodyLimit: Int) -> HTTPServerBuilder {
        .init { responder in
            BatonHTTP1Channel(inner: HTTP1Channel(responder: responder, configuration: configuration), bodyLimit: bodyLimit)
        }
    }
}

/// Says in each request's `Connection` header, in the one spelling the handlers after it read,
/// whether the client keeps the connection after the answer (RFC 9112 §9.3).
///
/// Whether it does depends on the request's version (HTTP/1.1 keeps it, HTTP/1.0 does not),
/// overridden by the header's `close` or `keep-alive` option, in any case and among other
/// options (NIO's `isKeepAlive`; `close` wins over `keep-alive`). The version is lost in the
/// conversion to `HTTPTypes`, and Hummingbird only honours a header that is exactly `close`;
/// so an HTTP/1.0 request without `keep-alive`, `Connection: Close` and `Connection: te, close`
/// used to be answered on a connection left open until the idle timeout. Here:
/// - a request that does not keep the connection gets `Connection: close`: Hummingbird answers
///   it and stops reading, and ``ClosingResponses`` puts `Connection: close` on the answer and
///   closes the connection after it;
/// - an HTTP/1.0 request that keeps it gets `Connection: keep-alive`, and ``ClosingResponses``
///   says so on the answer: HTTP/1.0 clients look for it before sending another request;
/// - any other request passes unchanged.
final class ConnectionPersistence: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        if !head.isKeepAlive {
            head.headers.replaceOrAdd(name: "connection", value: "close")
        } else if head.version == .http1_0 {
            head.headers.replaceOrAdd(name: "connection", value: "keep-alive")
        } else {
            context.fireChannelRead(data)
            return
        }
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }
}

@available(*, unavailable)
extension ConnectionPersistence: Sendable {}

/// Answers `Expect: 100-continue` with `100 Continue` as soon as the head is read (RFC 9110
/// §10.1.1), so that a client waiting for it sends its body at once. Hummingbird never sends
/// it: curl, for one, waited a second (its own timeout) before every such upload.
///
/// Not sent to an HTTP/1.0 request (RFC 9110 §15.2), nor for a request without a body, nor
/// for a body announced over the limit: that request is answered `413` at once, without being
/// invited to send. Nor while an earlier request on the connection is still being answered:
/// the interim answer would land inside that answer's bytes (a client pipelining behind an
/// upload is rare; it falls back to its own timeout).
final class ExpectContinue: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let bodyLimit: Int
    /// Requests whose head was read and whose answer has not ended.
    private var unanswered = 0

    init(bodyLimit: Int) {
        self.bodyLimit = bodyLimit
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            if unanswered == 0, Self.invitesBody(head, limit: bodyLimit) {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: nil)
            }
            unanswered += 1
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { unanswered = max(0, unanswered - 1) }
        context.write(data, promise: promise)
    }

    /// Whether `head` asks to be invited to send a body this server would take.
    static func invitesBody(_ head: HTTPRequestHead, limit: Int) -> Bool {
        guard head.version.major > 1 || (head.version.major == 1 && head.version.minor >= 1),
            head.headers["expect"].contains(where: { $0.lowercased() == "100-continue" })
        else { return false }
        if head.headers["transfer-encoding"].contains(where: { !$0.isEmpty }) { return true }
        guard let length = head.headers.first(name: "content-length").flatMap({ Int($0) }) else { return false }
        return length > 0 && length <= limit
    }
}

@available(*, unavailable)
extension ExpectContinue: Sendable {}
