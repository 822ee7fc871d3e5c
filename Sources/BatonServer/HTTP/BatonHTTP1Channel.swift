import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Hummingbird's HTTP/1.1 channel with three handlers more, ``RequestHeadCheck``,
/// ``ConnectionPersistence`` and ``ExpectContinue``, placed between NIO's HTTP/1 decoder and
/// the conversion to `HTTPTypes`: they need the request's HTTP version, or all of its `Host`
/// lines, which the conversion drops. That conversion is ``OriginFormCodec`` in place of
/// `HTTP1ToHTTPServerCodec` (the same, without parsing an origin-form target). Everything else
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
        inner.setup(channel: channel, logger: logger).flatMap { value in
            do {
                let pipeline = channel.pipeline.syncOperations
                let codec = try pipeline.handler(type: HTTP1ToHTTPServerCodec.self)
                try pipeline.addHandlers(
                    [RequestHeadCheck(), ConnectionPersistence(), ExpectContinue(bodyLimit: bodyLimit), OriginFormCodec()],
                    position: .before(codec))
                // ``OriginFormCodec`` takes the codec's place (removed at once: the channel reads nothing yet).
                return pipeline.removeHandler(codec).map { value }
            } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
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

/// Refuses a request head Baton does not serve, before its request reaches Hummingbird:
/// - `CONNECT`: Baton is no proxy, and NIO's parser takes everything after a `CONNECT` head as
///   a tunnel's bytes, so the answer went without a body and the next request on the connection
///   was never read (the refusal's 400 goes without its envelope too: NIO's encoder sends no
///   body in any answer to `CONNECT`);
/// - a `Transfer-Encoding` other than `chunked` alone (RFC 9112 §6.1: a coding the server does not
///   understand is refused, not skipped);
/// - a request without the one `Host` header HTTP/1.1 asks for (below).
///
/// RFC 9112 §3.2 has a
/// server answer `400` to an HTTP/1.1 request that has none, and to any request with more than
/// one `Host` line or a value that is not `host[:port]`. The conversion to `HTTPTypes` takes the
/// first `Host` as the request's authority and keeps the others as plain fields, so without
/// this a request whose two `Host` lines a proxy in front read one way was served the other
/// (a classic way to slip a request past a proxy's rules or into a cache under another name).
///
/// The refusal travels as NIO's own parser errors do (`invalidMethod` for CONNECT, and for
/// the others errors NIO's decoder itself never raises: ``HTTPParserError/batonHost``,
/// ``HTTPParserError/batonTransferEncoding``): Hummingbird answers `400` and closes the connection
/// after the answers before it, and ``MalformedRequestEnvelope`` gives that answer the envelope
/// and counts it (`request_line`, `host`, `transfer_encoding`). Nothing the client sends after
/// the refused head is passed on (its body is read and dropped), nor the parser's complaints
/// about it (the answer names what the head got wrong). The close waits for the
/// refused request's body to end, or ``ClosingResponses/linger``, as ``ClosingResponses``
/// waits for a body it refused: closed while the body still arrives, the socket is reset, and
/// the reset can destroy the answer before the client reads it. An HTTP/1.0 request may leave
/// `Host` out; an empty value is allowed (RFC 9112 §3.2: a target without an authority).
final class RequestHeadCheck: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum Refusal { case none, bodyArriving, ended }
    private var refusal = Refusal.none
    /// The close asked for while the refused body still arrived, and the linger's timer.
    private var heldClose: (mode: CloseMode, promise: EventLoopPromise<Void>?)?
    private var lingering: Scheduled<Void>?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch refusal {
        case .none:
            guard case .head(let head) = part, let error = Self.refusal(of: head) else { return context.fireChannelRead(data) }
            refusal = .bodyArriving
            context.fireErrorCaught(error)
        case .bodyArriving:
            guard case .end = part else { return }
            refusal = .ended
            closeHeld(context: context)
        case .ended:
            return
        }
    }

    /// While the refused body arrives, it is read and dropped, not left to fill the socket's
    /// buffers (Hummingbird reads no more after a refusal): a client that sends its whole body
    /// before it reads would otherwise be stuck sending until the close resets it.
    func channelReadComplete(context: ChannelHandlerContext) {
        context.fireChannelReadComplete()
        if refusal == .bodyArriving { context.read() }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if refusal != .none, error is HTTPParserError { return }
        context.fireErrorCaught(error)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard refusal == .bodyArriving, mode == .all, heldClose == nil, context.channel.isActive else {
            return context.close(mode: mode, promise: promise)
        }
        heldClose = (mode, promise)
        lingering = context.eventLoop.assumeIsolated().scheduleTask(in: ClosingResponses.linger) { self.closeHeld(context: context) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeHeld(context: context)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        closeHeld(context: context)
    }

    private func closeHeld(context: ChannelHandlerContext) {
        lingering?.cancel()
        lingering = nil
        guard let (mode, promise) = heldClose else { return }
        heldClose = nil
        context.close(mode: mode, promise: promise)
    }

    /// Why `head` is refused, as the parser error that carries the refusal; nil when it is not.
    static func refusal(of head: HTTPRequestHead) -> HTTPParserError? {
        if head.method == .CONNECT { return .invalidMethod }
        var host: String?
        var transferEncoding: String?
        // Compared byte by byte, folding case: a head's fields are read for every request.
        for field in head.headers {
            if field.name.utf8.elementsEqual("host".utf8, by: { $0 | 0x20 == $1 }) {
                guard host == nil else { return .batonHost }
                host = field.value
            } else if field.name.utf8.elementsEqual("transfer-encoding".utf8, by: { $0 | 0x20 == $1 }) {
                guard transferEncoding == nil else { return .batonTransferEncoding }
                transferEncoding = field.value
            }
        }
        // Only `chunked`, alone, frames a body here. NIO's parser frames `gzip, chunked` as
        // chunked and hands on the body still gzipped, under a coding the route never hears of.
        if let transferEncoding {
            let isSpace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
            let value = transferEncoding.utf8.drop(while: isSpace).reversed().drop(while: isSpace).reversed()
            guard value.elementsEqual("chunked".utf8, by: { $0 | 0x20 == $1 }) else { return .batonTransferEncoding }
        }
        guard let host else { return head.version.major == 1 && head.version.minor == 0 ? nil : .batonHost }
        return isValidHost(host) ? nil : .batonHost
    }

    /// `uri-host [":" port]` (RFC 9112 §3.2, RFC 3986 §3.2.2–3.2.3): an IP literal in brackets
    /// or a name of unreserved characters, sub-delims and percent-escapes, then digits after a
    /// colon. Empty is valid. No user info, spaces or a second colon outside the brackets.
    static func isValidHost(_ value: String) -> Bool {
        var bytes = value.utf8[...]
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return false }
            let literal = bytes[bytes.index(after: bytes.startIndex)..<close]
            // IPv6 (with a zone's `%25`) or a future form: unreserved, sub-delims, colons.
            guard !literal.isEmpty, literal.allSatisfy({ isNameByte($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "%") })
            else { return false }
            bytes = bytes[bytes.index(after: close)...]
        } else {
            let nameEnd = bytes.firstIndex(of: UInt8(ascii: ":")) ?? bytes.endIndex
            let name = bytes[..<nameEnd]
            var index = name.startIndex
            while index < name.endIndex {
                let byte = name[index]
                if byte == UInt8(ascii: "%") {
                    // A percent-escape: two hex digits.
                    let digits = name[name.index(after: index)...].prefix(2)
                    guard digits.count == 2, digits.allSatisfy(isHexDigit) else { return false }
                    index = name.index(index, offsetBy: 3)
                    continue
                }
                guard isNameByte(byte) else { return false }
                index = name.index(after: index)
            }
            bytes = bytes[nameEnd...]
        }
        guard let colon = bytes.first else { return true }
        return colon == UInt8(ascii: ":") && bytes.dropFirst().allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// Unreserved characters and sub-delims (RFC 3986 §2.2–2.3).
    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
            true
        default: false
        }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
    }
}

@available(*, unavailable)
extension RequestHeadCheck: Sendable {}

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
/// - a request NIO's parser reads nothing after gets `Connection: close` too: one that asks
///   to upgrade (an `Upgrade` field and `upgrade` among `Connection`'s options, as
///   `curl --http2` on `http://` sends), which Baton does not do, so the request behind it on
///   the connection was never read and waited for the idle timeout; and an HTTP/1.0 request
///   with `Transfer-Encoding`, whose framing RFC 9112 §6.1 has the server distrust and close;
/// - any other request passes unchanged.
final class ConnectionPersistence: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        if !head.isKeepAlive || Self.endsTheConnection(head) {
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

extension ConnectionPersistence {
    /// An upgrade request (llhttp's reading: an `Upgrade` field, and `upgrade` among the
    /// `Connection` options), or an HTTP/1.0 request with `Transfer-Encoding`.
    static func endsTheConnection(_ head: HTTPRequestHead) -> Bool {
        if head.headers.contains(name: "upgrade"),
            head.headers[canonicalForm: "connection"].contains(where: { $0.utf8.elementsEqual("upgrade".utf8, by: { $0 | 0x20 == $1 }) })
        {
            return true
        }
        return head.version == .http1_0 && head.headers.contains(name: "transfer-encoding")
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

extension HTTPParserError {
    /// ``RequestHeadCheck``'s refusals, carried as parser errors NIO's decoder never raises so
    /// that Hummingbird answers them as it answers the parser's, and ``MalformedRequestEnvelope``
    /// can tell them apart: the `Host` header.
    static let batonHost = HTTPParserError.invalidHost
    /// A `Transfer-Encoding` other than `chunked` alone.
    static let batonTransferEncoding = HTTPParserError.invalidQueryString
}
