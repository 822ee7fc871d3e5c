import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Ends the connection after an answer that says `Connection: close`, as HTTP/1.1 asks of the
/// server that sends it (RFC 9112 §9.6), and says it on the answer to a request that asked to
/// close. After a request that asks for it, Hummingbird stops reading and shuts only its
/// sending side (a client that does not close then holds the socket); it neither says so in
/// its answer nor acts on an answer that says so.
///
/// An answer says `Connection: close` when its request asked for it (``ConnectionPersistence``
/// has spelled every such request's header `close`; this handler adds it to the answer) and
/// when Baton will not take the rest of the request: `413 body_too_large` (answered from the
/// announced length, before the body is read), `408 request_timeout`, Hummingbird's `400`
/// for a request it cannot parse, and any answer written before its request's body was read
/// to the end (a 404, a refused device, a `GET` sent with a body). Without this, a client
/// that kept sending after such an answer had its whole body read and dropped, however long,
/// and a request behind it was served. A request whose header is `keep-alive` (every
/// HTTP/1.0 request that keeps the connection, spelled so by ``ConnectionPersistence``, and an
/// HTTP/1.1 one that says it) has its answer say `Connection: keep-alive`, unless the answer
/// closes.
///
/// Once a closing answer is written: if the request was read to its end, the connection
/// closes at once. If its body is still arriving, what arrives is dropped (a request behind it
/// included) and the connection closes when the body ends, or ``linger`` after the answer,
/// whichever comes first. Closed while input is still arriving, a socket is reset, and a reset
/// can destroy the answer before the client reads it: the linger gives the client that long to
/// read it. (For `408 request_timeout` the body's reading has already stopped; the linger only
/// bounds how long the connection stays.) Parts Hummingbird had already taken in before the
/// answer was written are beyond reach: a request pipelined behind a body read whole is still
/// served, unless its predecessor asked to close.
///
/// A client that stops taking its answers (it stopped reading, and the socket's buffers and
/// NIO's up to its high watermark are full) has its connection ended once that has lasted
/// `writeTimeout` (`http.idle.timeout`): otherwise the answer's write would wait for good,
/// holding the connection and its buffers, since the idle timer does not run while an answer
/// is being written.
final class ClosingResponses: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// How long a client still sending its body has to read the answer before the close.
    static let linger = TimeAmount.seconds(2)

    /// How long the client may take nothing of what is written to it.
    private let writeTimeout: TimeAmount
    /// Set while the client takes nothing: ends the connection when it fires.
    private var stalled: Scheduled<Void>?

    init(writeTimeout: TimeAmount) {
        self.writeTimeout = writeTimeout
    }

    /// What each request read and not yet answered asked of the connection, in order (answers
    /// go out in their requests' order: Hummingbird serves a connection's requests one by one).
    private var asked: [Asked] = []
    private enum Connection { case unsaid, close, keepAlive }
    private struct Asked {
        var connection: Connection
        /// Its body was read to the end before its answer was written.
        var ended = false
    }
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
        case .head(let request):
            readingRequest = true
            let connection: Connection =
                switch request.headerFields.value(.connection) {
                case "close": .close
                case "keep-alive": .keepAlive
                default: .unsaid
                }
            asked.append(Asked(connection: connection))
        case .body: break
        case .end:
            readingRequest = false
            if !asked.isEmpty { asked[asked.count - 1].ended = true }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where head.status.kind != .informational:
            // The parser's 400 for a head it could not read answers no request this handler saw.
            let request = asked.isEmpty ? Asked(connection: .unsaid, ended: true) : asked.removeFirst()
            // An answer written while its request's body is still arriving (a GET with a body, a
            // 404, a refused device, whatever answered without reading it) closes too: Baton will
            // not read the rest, and without the close Hummingbird would read and drop it with
            // no limit of size or time.
            let asksClose = request.connection == .close || !request.ended
            closingResponse = head.headerFields.value(.connection)?.lowercased() == "close" || asksClose
            switch request.connection {
            case _ where asksClose && head.headerFields.value(.connection) != "close":
                head.headerFields[.connection] = "close"
            case .keepAlive where head.headerFields.value(.connection) == nil:
                head.headerFields[.connection] = "keep-alive"
            default:
                context.write(data, promise: promise)
                return
            }
            context.write(wrapOutboundOut(.head(head)), promise: promise)
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
        case .head, .body, .end:
            context.write(data, promise: promise)
        }
    }

    /// The client stopped taking what is written (the channel is over its high watermark): the
    /// connection ends if that lasts `writeTimeout`. A timer only then, not one per answer.
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stalled?.cancel()
            stalled = nil
        } else if stalled == nil {
            stalled = context.eventLoop.assumeIsolated().scheduleTask(in: writeTimeout) { context.close(promise: nil) }
        }
        context.fireChannelWritabilityChanged()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        lingering?.cancel()
        lingering = nil
        stalled?.cancel()
        stalled = nil
    }
}

@available(*, unavailable)
extension ClosingResponses: Sendable {}
