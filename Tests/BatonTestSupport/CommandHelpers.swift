import BatonJSON
import HTTPTypes
import HummingbirdTesting
import NIOCore

extension TestClientProtocol {
    /// POSTs `{"payload": …, "input": …}` to `/v{version}/command`.
    public func command(
        _ payload: String, input: JSONValue? = nil, version: Int = 3, headers: HTTPFields = [:]
    ) async throws -> TestResponse {
        var body: JSONObject = ["payload": .string(payload)]
        if let input { body["input"] = input }
        var headers = headers
        headers[.contentType] = "application/json"
        return try await execute(
            uri: "/v\(version)/command", method: .post, headers: headers,
            body: ByteBuffer(bytes: JSONEncoding.encode(.object(body))))
    }
}

extension JSONValue {
    /// The payload of the command action at `path` (e.g. `submit`, `retry`).
    public func payload(_ path: String) -> String? { value(atPath: path)?["payload"]?.stringValue }
}

/// Headers for a device subject, with the device token the server issues for it.
public func deviceHeaders(_ device: String) -> HTTPFields {
    [
        HTTPField.Name("X-Device-Id")!: device,
        HTTPField.Name("X-Device-Token")!: TestApplication.signer.deviceToken(for: device.lowercased()),
    ]
}

/// Headers for a signed-in user.
public func userHeaders(_ user: String) async throws -> HTTPFields {
    [.authorization: try await TestTokens.bearer(user)]
}
