import BatonJSON
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Gives the HTTP parser's own refusal the error envelope every other error has.
///
/// When NIO's parser refuses a request (a control character or no colon in a header, a head
/// over the decoder's limits, a `Content-Length` or chunk size that is not a number), the
/// refusal travels up the pipeline as an `HTTPParserError` and Hummingbird answers it with a
/// bare `400` (`Connection: close`, `Content-Length: 0`), then closes the connection. That
/// happens before the router for a broken head, and inside the route for a broken body
/// (`ErrorMiddleware` lets the error through so that Hummingbird answers it the same way).
/// This handler notes the error as it passes and, when that bare 400 is written, sends it with
/// `{"error": {"code": "invalid_request", …}}` naming what was wrong. Every other response
/// passes through untouched.
final class MalformedRequestEnvelope: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The parser's refusal, until its answer is written.
    private var refusal: HTTPParserError?

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? HTTPParserError { refusal = error }
        context.fireErrorCaught(error)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard let refusal, case .head(let bare) = unwrapOutboundIn(data), bare.status == .badRequest,
            bare.headerFields[.contentLength] == "0"
        else {
            context.write(data, promise: promise)
            return
        }
        self.refusal = nil
        let body = JSONEncoding.encode(APIError.invalidRequest(Self.message(for: refusal)).body)
        var head = bare
        head.headerFields[.contentType] = Response.jsonContentType
        head.headerFields[.contentLength] = String(body.count)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: promise)
    }

    /// What the client sent wrong, in its terms. The limits are Hummingbird's decoder defaults.
    static func message(for error: HTTPParserError) -> String {
        switch error {
        case .headerOverflow:
            "the request's head is too large: over 80 KiB of URL and headers, or over 1000 headers"
        case .invalidHeaderToken, .invalidCharactersUsed, .invalidConstant, .lfExpected:
            "a header or the request line holds a character HTTP does not allow, or a header has no colon"
        case .invalidContentLength, .unexpectedContentLength:
            "the Content-Length header is not a single whole number"
        case .invalidChunkSize:
            "a chunk of the body does not start with a valid size"
        case .invalidMethod, .invalidURL, .invalidVersion, .invalidHost, .invalidPort, .invalidPath:
            "the request line is not METHOD /path HTTP/1.1"
        default:
            "the request is not valid HTTP/1.1"
        }
    }
}

@available(*, unavailable)
extension MalformedRequestEnvelope: Sendable {}
