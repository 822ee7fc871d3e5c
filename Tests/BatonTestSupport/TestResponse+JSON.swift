import BatonJSON
import HummingbirdTesting
@_exported import NIOCore
import Testing

extension TestResponse {
    /// The body parsed as JSON; a body that is not JSON is recorded as a test issue.
    public var json: JSONValue {
        do {
            return try JSONValue.parse(Array(buffer: body))
        } catch {
            Issue.record("response body is not JSON (\(error)): \(String(buffer: body).prefix(300))")
            return .null
        }
    }

    /// The body as text.
    public var text: String { String(buffer: body) }
}
