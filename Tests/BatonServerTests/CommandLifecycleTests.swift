import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import BatonServer
import BatonTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@Suite("Commands across restarts, definition changes and malformed bodies")
struct CommandLifecycleTests {
    static let device = "8d3f6c2e-5b1a-4e7f-9c0d-2a4b6c8d0e1f"

    @Test("a session survives a server restart mid-flow")
    func restart() async throws {
        let conninfo = try await TestDatabase.make(migrated: true)
        let headers = deviceHeaders(Self.device)
        // First server: start the flow, keep the submit payload, shut down.
        let firstEnvironment = try await TestApplication.environment(conninfo: conninfo, flows: TestFlows.directory, registry: TestFlows.registry())
        try await TestFlows.prepare(firstEnvironment.pool)
        let submit = try await buildApplication(firstEnvironment).test(.router) { client in
            let response = try await client.command(TestFlows.startPayload("note-create", subject: "device:\(Self.device)"), headers: headers)
            return try #require(response.json.payload("submit"))
        }
        // Second server, same database: the session carries on.
        let second = try await TestApplication.environment(conninfo: conninfo, flows: TestFlows.directory, registry: TestFlows.registry())
        try await buildApplication(second).test(.router) { client in
            let done = try await client.command(submit, input: ["text": "after restart"], headers: headers)
            #expect(done.json == ["type": "done", "message": "Saved “after restart”", "refresh": true])
        }
    }

    @Test("editing a flow file: in-flight sessions keep the old definition, new sessions get the new one")
    func definitionPinning() async throws {
        let conninfo = try await TestDatabase.make(migrated: true)
        let headers = deviceHeaders(Self.device)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("flows-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: TestFlows.directory, to: directory)
        let file = directory.appendingPathComponent("note-create.yaml")

        let before = try await TestApplication.environment(conninfo: conninfo, flows: directory, registry: TestFlows.registry())
        try await TestFlows.prepare(before.pool)
        let oldSubmit = try await buildApplication(before).test(.router) { client in
            let response = try await client.command(TestFlows.startPayload("note-create", subject: "device:\(Self.device)"), headers: headers)
            return try #require(response.json.payload("submit"))
        }

        // The author changes the confirmation and restarts.
        let edited = try String(contentsOf: file, encoding: .utf8).replacingOccurrences(of: "Saved “{{result.text}}”", with: "Noted: {{result.text}}")
        try edited.write(to: file, atomically: true, encoding: .utf8)
        let after = try await TestApplication.environment(conninfo: conninfo, flows: directory, registry: TestFlows.registry())
        try await buildApplication(after).test(.router) { client in
            let old = try await client.command(oldSubmit, input: ["text": "old rules"], headers: headers)
            #expect(old.json["message"] == "Saved “old rules”", "the running session keeps the rules it started with: \(old.text)")
            let fresh = try await client.command(
                TestFlows.startPayload("note-create", subject: "device:\(Self.device)"), headers: headers)
            let new = try await client.command(try #require(fresh.json.payload("submit")), input: ["text": "new rules"], headers: headers)
            #expect(new.json["message"] == "Noted: new rules")
            let hashes = try await after.pool.query("SELECT count(DISTINCT definition_hash) FROM flow_sessions")[0].decode(Int.self, at: 0)
            #expect(hashes == 2)
        }
    }

    @Test("every malformed JSON body from JSONTestSuite gets 400 with the envelope, never a 500")
    func malformedBodies() async throws {
        let directory = TestDatabase.repositoryRoot.deletingLastPathComponent().appendingPathComponent("shared/corpora/json/JSONTestSuite/test_parsing")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix("n_") }.sorted()
        #expect(files.count > 150)
        let environment = try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry())
        try await buildApplication(environment).test(.router) { client in
            for file in files {
                let body = try Data(contentsOf: directory.appendingPathComponent(file))
                let response = try await client.execute(
                    uri: "/v3/command", method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(bytes: body))
                let code = response.json["error"]?["code"]?.stringValue
                if body.count > environment.configuration.bodyLimit {
                    #expect(response.status == .contentTooLarge, "\(file)")
                    #expect(code == "body_too_large")
                } else {
                    #expect(response.status == .badRequest, "\(file): \(response.status)")
                    #expect(code == "invalid_json" || code == "invalid_request", "\(file): \(code ?? "no envelope")")
                }
            }
            // The message says where, once.
            let truncated = try await client.execute(uri: "/v3/command", method: .post, body: ByteBuffer(string: "{\"payload\": "))
            let message = truncated.json["error"]?["message"]?.stringValue ?? ""
            #expect(message.hasPrefix("the body is not valid JSON: ") && message.hasSuffix(" at byte 12"), "\(message)")
            #expect(message.components(separatedBy: "not valid JSON").count == 2, "\(message)")
            // Valid JSON of the wrong shape is invalid_request.
            for body in ["[]", "\"payload\"", "{\"payload\": 5}", "{\"payload\": \"x\", \"input\": []}", "{\"payload\": \"x\", \"input\": {\"text\": 1}}", "{\"payload\": \"x\", \"input\": {\"choices\": [1]}}"] {
                let response = try await client.execute(uri: "/v3/command", method: .post, body: ByteBuffer(string: body))
                #expect(response.status == .badRequest, "\(body)")
                #expect(response.json["error"]?["code"] == "invalid_request", "\(body)")
            }
        }
    }

    @Test("a body over the limit gets 413, announced or streamed")
    func bodyLimit() async throws {
        let environment = try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry())
        try await buildApplication(environment).test(.router) { client in
            let big = "{\"payload\": \"" + String(repeating: "a", count: 70 * 1024) + "\"}"
            let response = try await client.execute(uri: "/v3/command", method: .post, body: ByteBuffer(string: big))
            #expect(response.status == .contentTooLarge)
            #expect(response.json["error"]?["code"] == "body_too_large")
        }
    }

    @Test("unknown versions and paths: /x3/command is 404, GET /v3/command is 405")
    func routing() async throws {
        let environment = try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry())
        try await buildApplication(environment).test(.router) { client in
            #expect(try await client.execute(uri: "/x3/command", method: .post).status == .notFound)
            #expect(try await client.execute(uri: "/v0/command", method: .post).status == .notFound)
            // A version past five digits is no endpoint either, and the answer says why.
            for uri in ["/v123456/command", "/v123456/screens/home", "/v123456/deeplinks/resolve"] {
                let method: HTTPRequest.Method = uri.hasSuffix("home") ? .get : .post
                let tooLarge = try await client.execute(uri: uri, method: method)
                #expect(tooLarge.status == .notFound, "\(uri)")
                #expect(tooLarge.json["error"]?["message"] == "contract version v123456 is out of range: /v1 to /v99999", "\(uri)")
            }
            #expect(try await client.execute(uri: "/vx/command", method: .post).json["error"]?["message"] == "no such endpoint: /vx/command")
            let get = try await client.execute(uri: "/v3/command", method: .get)
            #expect(get.status == .methodNotAllowed)
            #expect(get.headers[.allow] == "POST")
        }
    }
}
