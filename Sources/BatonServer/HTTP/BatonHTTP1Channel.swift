import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Hummingbird's HTTP/1.1 channel with one handler more, in front of the conversion to
/// `HTTPTypes`: ``ConnectionPersistence``, which needs the request's HTTP version, and that
/// conversion drops it. Everything else is `HTTP1Channel`'s: its pipeline, its handlers (the
/// `additionalChannelHandlers` of its configuration included) and its request loop.
struct BatonHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let inner: HTTP1Channel

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
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

/// Closes the connection after a request that did not ask to keep it, as HTTP/1.1 says
/// (RFC 9112 §9.3, §9.6), and says so in the answer.
///
/// Hummingbird keeps a connection open unless the request's `Connection` header is exactly
/// `close`, and its answers never say whether the connection stays. So an HTTP/1.0 request
/// without `Connection: keep-alive` (whose client reads the answer to the connection's end),
/// `Connection: Close` and `Connection: te, close` all left the connection open until the idle
/// timeout. Here, before the request's head becomes an `HTTPTypes` request and loses its version:
/// - a request that does not keep the connection (NIO's `isKeepAlive`: the version's default,
///   then the header's `close` or `keep-alive` token, in any case) has its `Connection` header
///   made `close`, which Hummingbird understands: it answers, then stops reading the connection;
/// - that request's answer says `Connection: close`, and ``ClosingResponses`` then closes the
///   connection once the request has been read;
/// - an HTTP/1.0 request that asks to keep the connection has its answer say
///   `Connection: keep-alive`, which HTTP/1.0 clients look for before they send another request.
///
/// Answers go out in the order their requests came (Hummingbird serves a connection's requests
/// one by one), so the n-th answer's head belongs to the n-th request's head. No request after
/// one that closes is answered.
final class ConnectionPersistence: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// What the answer to a request should say about the connection.
    private enum Persistence { case keep, keepHTTP10, close }

    /// One entry per request read and not yet answered, in order; once a request closes the
    /// connection, nothing after it is noted (it will not be answered).
    private var pending: [Persistence] = []
    private var closing = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data), !closing else {
            context.fireChannelRead(data)
            return
        }
        if head.isKeepAlive {
            pending.append(head.version.major == 1 && head.version.minor == 0 ? .keepHTTP10 : .keep)
            context.fireChannelRead(data)
        } else {
            closing = true
            pending.append(.close)
            head.headers.replaceOrAdd(name: "connection", value: "close")
            context.fireChannelRead(wrapInboundOut(.head(head)))
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // An informational answer (`100 Continue`) comes before the request's final one.
        guard case .head(var head) = unwrapOutboundIn(data), head.status.code >= 200, !pending.isEmpty else {
            context.write(data, promise: promise)
            return
        }
        switch pending.removeFirst() {
        case .keep:
            context.write(data, promise: promise)
        case .keepHTTP10:
            if !head.headers.contains(name: "connection") { head.headers.add(name: "connection", value: "keep-alive") }
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .close:
            head.headers.replaceOrAdd(name: "connection", value: "close")
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        }
    }
}

@available(*, unavailable)
extension ConnectionPersistence: Sendable {}
