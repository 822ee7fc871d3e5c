import BatonJSON
import BatonRuntime
import BatonServer
import BatonTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

/// The App Clip handshake (PROTOCOL §1): a new device id gets a signed token, and a device id
/// without its token is nobody's to use.
@Suite("Device tokens")
struct DeviceTokenTests {
    static let idHeader = HTTPField.Name("X-Device-Id")!
    static let tokenHeader = HTTPField.Name("X-Device-Token")!

    @Test("a new device gets X-Device-Token; later requests need it; a token for another device or a forged one is 401")
    func handshake() async throws {
        let environment = try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry())
        try await TestFlows.prepare(environment.pool)
        try await buildApplication(environment).test(.router) { client in
            let device = UUID().uuidString.lowercased()
            let first = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: [Self.idHeader: device])
            #expect(first.status == .ok)
            let token = try #require(first.headers[Self.tokenHeader])
            #expect(TestApplication.signer.verifyDeviceToken(token, device: device))

            // With its token the device acts as itself, and gets no new token.
            let start = TestFlows.startPayload("note-create", subject: "device:\(device)")
            let withToken = try await client.command(start, headers: [Self.idHeader: device, Self.tokenHeader: token])
            #expect(withToken.status == .ok)
            #expect(withToken.headers[Self.tokenHeader] == nil)

            // Someone who only read the device id (from a payload's subject) cannot use it.
            try await Task.sleep(for: .milliseconds(10))
            try await environment.pool.query("UPDATE devices SET created_at = now() - interval '1 minute'")
            let stolen = try await client.command(start, headers: [Self.idHeader: device])
            #expect(stolen.status == .unauthorized)
            #expect(stolen.json["error"]?["code"] == "unauthenticated")
            let other = UUID().uuidString.lowercased()
            let borrowed = try await client.command(
                start, headers: [Self.idHeader: device, Self.tokenHeader: TestApplication.signer.deviceToken(for: other)])
            #expect(borrowed.status == .unauthorized)
            let forged = try await client.command(start, headers: [Self.idHeader: device, Self.tokenHeader: "test1.AAAA"])
            #expect(forged.status == .unauthorized)
            // Nothing ran for the refused requests: only the one session the token started.
            #expect(try await environment.pool.query("SELECT count(*) FROM flow_sessions")[0].decode(Int.self, at: 0) == 1)
        }
    }

    // Rotation (docs/operations.md): the new key goes first, the old one stays while payloads
    // signed with it live, then it goes. A device token was never issued again, so once the old
    // key went, every device registered before the rotation was locked out of its id for good.
    @Test("a device token made with an older signing key is accepted and answered with one made with the current key")
    func tokenRenewedAfterRotation() async throws {
        let environment = try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry())
        try await TestFlows.prepare(environment.pool)
        let older = try #require(TestApplication.signingKeys.split(separator: ",").last.map(String.init))
        #expect(older.hasPrefix("test0:"))
        try await buildApplication(environment).test(.router) { client in
            let device = UUID().uuidString.lowercased()
            try await environment.pool.query("INSERT INTO devices (id, created_at) VALUES ($1::uuid, now() - interval '1 day')", [device])
            let oldToken = try PayloadSigner(configuration: older).deviceToken(for: device)
            let renewed = try await client.execute(
                uri: "/v3/screens/notes", method: .get, headers: [Self.idHeader: device, Self.tokenHeader: oldToken])
            #expect(renewed.status == .ok)
            let current = TestApplication.signer.deviceToken(for: device)
            #expect(renewed.headers[Self.tokenHeader] == current, "the token made with the first key, for the client to keep")
            #expect(current.hasPrefix("test1."))
            // With the current one, nothing more is sent.
            let settled = try await client.execute(
                uri: "/v3/screens/notes", method: .get, headers: [Self.idHeader: device, Self.tokenHeader: current])
            #expect(settled.status == .ok)
            #expect(settled.headers[Self.tokenHeader] == nil)
        }
    }

    // Bad input never changes stored data (docs/protocol.md): a refused first request used to
    // register the id anyway and answer without its token, so 30 s later the id was nobody's.
    @Test("a first request that is refused (404, 400) registers nothing and gets no token; the id stays the device's to claim")
    func refusedFirstRequest() async throws {
        let environment = try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry())
        try await TestFlows.prepare(environment.pool)
        try await buildApplication(environment).test(.router) { client in
            let device = UUID().uuidString.lowercased()
            func registered() async throws -> Int {
                try await environment.pool.query("SELECT count(*) FROM devices WHERE id = $1::uuid", [device])[0].decode(Int.self, at: 0)
            }
            let missing = try await client.execute(uri: "/v3/screens/does-not-exist", method: .get, headers: [Self.idHeader: device])
            #expect(missing.status == .notFound)
            let malformed = try await client.execute(
                uri: "/v3/command", method: .post, headers: [Self.idHeader: device, .contentType: "application/json"],
                body: ByteBuffer(string: "{"))
            #expect(malformed.status == .badRequest)
            #expect(missing.headers[Self.tokenHeader] == nil && malformed.headers[Self.tokenHeader] == nil)
            #expect(try await registered() == 0)
            let first = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: [Self.idHeader: device])
            #expect(first.status == .ok)
            #expect(first.headers[Self.tokenHeader] == TestApplication.signer.deviceToken(for: device))
            #expect(try await registered() == 1)
        }
    }

    @Test("concurrent first requests of one new device all succeed and all get its token")
    func concurrentFirstRequests() async throws {
        let environment = try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry())
        try await TestFlows.prepare(environment.pool)
        try await buildApplication(environment).test(.router) { client in
            let device = UUID().uuidString.lowercased()
            let tokens = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String?).self) { group in
                for _ in 0..<5 {
                    group.addTask {
                        let response = try await client.execute(uri: "/v3/screens/notes", method: .get, headers: [Self.idHeader: device])
                        return (response.status, response.headers[Self.tokenHeader])
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(tokens.allSatisfy { $0.0 == .ok && $0.1 != nil }, "\(tokens)")
            #expect(Set(tokens.compactMap(\.1)).count == 1)
        }
    }
}
