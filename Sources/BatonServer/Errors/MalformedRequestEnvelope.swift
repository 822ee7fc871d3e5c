import BatonJSON
import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Gives the HTTP parser's own refusal the error envelope every other error has.
///
/// A request NIO cannot parse (a control character in a header, a request line or head over
/// the decoder's 80 KiB limits, a broken chunked body) never reaches the router:
/// Hummingbird answers it with a bare `400` (`Connection: close`, `Content-Length: 0`) and
/// closes the connection. That is the only bare 400 on the wire, since every 400 Baton writes
/// itself carries the envelope, so this handler recognises it by its head and adds the body
/// `{"error": {"code": "invalid_request", …}}`. The parser's error itself never reaches this
/// handler's side of the pipeline, which is why the message names no particular cause.
/// Every other response passes through untouched.
final class MalformedRequestEnvelope: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    static let message =
        "the request is not valid HTTP/1.1: a malformed request line, header or chunked body, or a request head over 80 KiB"
    private static let body = JSONEncoding.encode(APIError.invalidRequest(message).body)

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .head(let refusal) = unwrapOutboundIn(data), Self.isParserRefusal(refusal) else {
            context.write(data, promise: promise)
            return
        }
        var head = refusal
        head.headerFields[.contentType] = "application/json"
        head.headerFields[.contentLength] = String(Self.body.count)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: Self.body))), promise: promise)
    }

    /// Hummingbird's answer to an `HTTPParserError`: 400 with exactly `Connection: close` and
    /// `Content-Length: 0`.
    static func isParserRefusal(_ head: HTTPResponse) -> Bool {
        head.status == .badRequest && head.headerFields.count == 2
            && head.headerFields[.contentLength] == "0" && head.headerFields[.connection] == "close"
    }
}
