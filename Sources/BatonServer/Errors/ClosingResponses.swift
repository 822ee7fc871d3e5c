import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Ends the connection after a response that says `Connection: close`, as HTTP/1.1 asks of the
/// server that sends it (RFC 9112 §9.6): Hummingbird closes after a request that asks for it,
/// not after a response that says so.
///
/// Baton says so when it will not read the rest of the request: `413 body_too_large` (the body
/// is over the limit) and `408 request_timeout` (the body stopped arriving). Without this, a
/// client that kept sending after its 413 had the whole body read and thrown away, however long.
///
/// The close lingers, as web servers' do: the connection is closed ``linger`` after the answer
/// is written, the rest of the body read and dropped meanwhile. Closed at once, a socket with
/// unread input is reset, and a reset can destroy the answer before the client reads it. (Shutting
/// the sending side first, to give the client its end of stream at once, made NIO close the
/// whole connection within milliseconds: a reset all the same.)
final class ClosingResponses: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// How long a client may go on sending after the answer and its end of stream.
    static let linger = TimeAmount.seconds(2)

    /// Whether the response being written said `Connection: close`.
    private var closing = false
    private var lingering: Scheduled<Void>?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            closing = head.headerFields[.connection] == "close"
            context.write(data, promise: promise)
        case .end where closing:
            closing = false
            let written = promise ?? context.eventLoop.makePromise()
            context.write(data, promise: written)
            written.futureResult.assumeIsolated().whenComplete { _ in
                self.lingering = context.eventLoop.assumeIsolated().scheduleTask(in: Self.linger) { context.close(promise: nil) }
            }
        case .body, .end:
            context.write(data, promise: promise)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        lingering?.cancel()
        lingering = nil
    }
}

@available(*, unavailable)
extension ClosingResponses: Sendable {}
