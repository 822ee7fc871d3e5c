import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Hummingbird's HTTP/1.1 channel with one handler more, ``ConnectionPersistence``, placed
/// between NIO's HTTP/1 decoder and `HTTP1ToHTTPServerCodec`: it needs the request's HTTP
/// version, which the conversion to `HTTPTypes` drops. Everything else is `HTTP1Channel`'s: its
/// pipeline, its handlers (the `additionalChannelHandlers` of its configuration included) and
/// its request loop.
struct BatonHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let inner: HTTP1Channel

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        // `HTTP1Channel.setup` builds the pipeline on the channel's loop before the channel is
        // registered, so the handler is in place before the first read.
        inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let codec = try pipeline.handler(type: HTTP1ToHTTPServerCodec.self)
            try pipeline.addHandler(ConnectionPersistence(), position: .before(codec))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 as `.http1(configuration:)` serves it, with ``BatonHTTP1Channel``'s handler.
    static func batonHTTP1(configuration: HTTP1Channel.Configuration) -> HTTPServerBuilder {
        .init { responder in BatonHTTP1Channel(inner: HTTP1Channel(responder: responder, configuration: configuration)) }
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
