import BatonJSON
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Gives the HTTP parser's own refusal the error envelope every other error has.
///
/// When NIO's parser refuses a request (a control character or no colon in a header, a head
/// over the decoder's limits, a `Content-Length` or chunk size that is not a number), or
/// ``RequestHeadCheck`` refuses its head (`CONNECT`, its `Host`, its `Transfer-Encoding`), the
/// refusal travels up the pipeline as an `HTTPParserError` and Hummingbird answers it with a
/// bare `400` (`Connection: close`, `Content-Length: 0`), then closes the connection. That
/// happens before the router for a broken head, and inside the route for a broken body
/// (`ErrorMiddleware` lets the error through so that Hummingbird answers it the same way).
/// This handler notes the error as it passes and, when that bare 400 is written, sends it with
/// `{"error": {"code": "invalid_request", …}}` naming what was wrong, and counts it in
/// `baton_http_refused_total{reason}` (a refused head never reaches the middlewares that count
/// the others). Every other response passes through untouched.
final class MalformedRequestEnvelope: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The parser's refusal, until its answer is written.
    private var refusal: HTTPParserError?
    private let metrics: BatonMetrics

    init(metrics: BatonMetrics) {
        self.metrics = metrics
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? HTTPParserError { refusal = error }
        context.fireErrorCaught(error)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // Hummingbird's answer to the refusal: 400, `Content-Length: 0`, `Connection: close`. On
        // a connection the server closed (its idle timeout, with half a head read), the parser's
        // complaint about the cut is no refusal of the client's, and the answer goes nowhere.
        guard let refusal, context.channel.isActive, case .head(let bare) = unwrapOutboundIn(data), bare.status == .badRequest,
            bare.headerFields.value(.contentLength) == "0", bare.headerFields.value(.connection) == "close"
        else {
            context.write(data, promise: promise)
            return
        }
        self.refusal = nil
        let (reason, message) = Self.describe(refusal)
        metrics.recordHTTPRefused(reason)
        let body = JSONEncoding.encode(APIError.invalidRequest(message).body)
        var head = bare
        head.headerFields[.contentType] = Response.jsonContentType
        head.headerFields[.contentLength] = String(body.count)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: promise)
    }

    /// Why a request was refused: the `reason` label of `baton_http_refused_total`.
    enum Reason: String, CaseIterable {
        case headTooLarge = "head_too_large"
        case invalidCharacter = "invalid_character"
        case contentLength = "content_length"
        case chunkSize = "chunk_size"
        case requestLine = "request_line"
        /// No `Host` on an HTTP/1.1 request, more than one, or one that is not `host[:port]`
        /// (``RequestHeadCheck``).
        case host
        /// A `Transfer-Encoding` other than `chunked` alone (``RequestHeadCheck``).
        case transferEncoding = "transfer_encoding"
        /// The client closed its side before the head or body was complete (a cancelled upload).
        case truncated
        case other
    }

    /// What the client sent wrong: the metric's reason and a message in the client's terms.
    /// The limits are Hummingbird's decoder defaults.
    static func describe(_ error: HTTPParserError) -> (reason: Reason, message: String) {
        switch error {
        case .headerOverflow:
            (.headTooLarge, "the request's head is too large: over 80 KiB of URL and headers, or over 1000 headers")
        case .invalidHeaderToken, .invalidCharactersUsed, .lfExpected:
            (.invalidCharacter, "a header or the request line holds a character HTTP does not allow, or a header has no colon")
        case .invalidContentLength, .unexpectedContentLength:
            (.contentLength, "the Content-Length header is not a single whole number")
        case .invalidChunkSize:
            (.chunkSize, "a chunk of the body does not start with a valid size")
        case .batonHost:
            (.host, "the request needs exactly one Host header holding host[:port] (an HTTP/1.0 request may have none)")
        case .batonTransferEncoding:
            (.transferEncoding, "the only Transfer-Encoding read here is chunked, alone; send the body as it is")
        case .invalidMethod:
            (.requestLine, "the method is not one Baton serves: not an HTTP method, or CONNECT (Baton is no proxy)")
        case .invalidURL, .invalidVersion, .invalidPort, .invalidPath, .invalidConstant:
            (.requestLine, "the request line is not METHOD /path HTTP/1.1")
        case .invalidEOFState:
            (.truncated, "the request ended before its head or body was complete")
        default:
            (.other, "the request is not valid HTTP/1.1")
        }
    }
}

@available(*, unavailable)
extension MalformedRequestEnvelope: Sendable {}
