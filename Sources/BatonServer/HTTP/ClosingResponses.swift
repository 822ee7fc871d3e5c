import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Ends the connection after a response that says `Connection: close`, as HTTP/1.1 asks of the
/// server that sends it (RFC 9112 §9.6): Hummingbird closes after a request that asks for it,
/// not after a response that says so.
///
/// Baton says so when it will not take the rest of the request: `413 body_too_large` (answered
/// from the announced length, before the body is read) and Hummingbird's `400` for a request it
/// cannot parse. Without this, a client that kept sending after its 413 had its whole body read
/// and dropped, however long, and a request behind it was served.
///
/// Once the answer is written: if the request was read to its end, the connection closes at
/// once. If its body is still arriving, what arrives is dropped (a request behind it included)
/// and the connection closes when the body ends, or ``linger`` after the answer, whichever comes
/// first. Closed while input is still arriving, a socket is reset, and a reset can destroy the
/// answer before the client reads it: the linger gives the client that long to read it. (For
/// `408 request_timeout` the body's reading has already stopped; the linger only bounds how long
/// the connection stays.) Parts Hummingbird had already taken in before the answer was written
/// are beyond reach: a request pipelined behind a body read whole is still served.
final class ClosingResponses: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// How long a client still sending its body has to read the answer before the close.
    static let linger = TimeAmount.seconds(2)

    /// The response being written says `Connection: close`.
    private var closingResponse = false
    /// A request's head was read and its end was not yet.
    private var readingRequest = false
    /// A closing response was written: what the client sends now is dropped.
    private var answered = false
    private var lingering: Scheduled<Void>?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if answered {
            if case .end = part { context.close(promise: nil) }
            return
        }
        switch part {
        case .head: readingRequest = true
        case .body: break
        case .end: readingRequest = false
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            closingResponse = head.headerFields[.connection]?.lowercased() == "close"
            context.write(data, promise: promise)
        case .end where closingResponse:
            closingResponse = false
            let written = promise ?? context.eventLoop.makePromise()
            context.write(data, promise: written)
            written.futureResult.assumeIsolated().whenComplete { result in
                guard case .success = result, context.channel.isActive, !self.answered else { return }
                self.answered = true
                if !self.readingRequest {
                    context.close(promise: nil)
                } else {
                    self.lingering = context.eventLoop.assumeIsolated().scheduleTask(in: Self.linger) { context.close(promise: nil) }
                }
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
