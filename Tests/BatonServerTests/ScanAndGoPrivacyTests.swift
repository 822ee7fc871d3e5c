import BatonBuiltinFlows
import BatonJSON
import BatonScenarios
import BatonServer
import BatonTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

/// Scan & Go shows an anonymous device only what recognises a parcel, and bounds how many
/// labels one device can try.
@Suite("Scan & Go: privacy and lookup limits")
struct ScanAndGoPrivacyTests {
    @Test("the confirm screen shows the recipient's initials and a partial postcode, never the full ones")
    func masked() async throws {
        let environment = try await TestApplication.environment(flows: BuiltinFlowsTests.flows, registry: BuiltinFlowsTests.registry())
        _ = try await environment.pool.withConnection { try await DemoData.seed($0) }
        let headers = deviceHeaders("7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d")
        try await buildApplication(environment).test(.router) { client in
            let parcels = try await client.execute(uri: "/v3/screens/send-parcel", method: .get, headers: headers).json
            let scan = try await client.command(try #require(ScenarioRunner.payload(titled: "Drop off here", in: parcels)), headers: headers).json
            let confirm = try await client.command(
                try #require(ScenarioRunner.payload(titled: "Use this code", in: scan)), input: ["text": "3SDEMO0000001"], headers: headers)
            let row = try await environment.pool.query("SELECT recipient, postcode FROM shipments WHERE label = '3SDEMO0000001'")[0]
            let (recipient, postcode) = (try row.decode(String.self, at: 0), try row.decode(String.self, at: 1))
            #expect(!confirm.text.contains(recipient) && !confirm.text.contains(postcode), "\(confirm.text)")
            let rows = confirm.json["screen"]?["sections"]?.arrayValue?.first?["components"]?.arrayValue ?? []
            #expect(rows.first?["title"]?.stringValue == recipient.split(separator: " ").map { "\($0.first!)." }.joined(separator: " "))
            #expect(rows.dropFirst().first?["title"]?.stringValue == "\(postcode.prefix(4)) \(postcode.dropFirst(5).prefix(1))·")
        }
    }

    @Test("more than 20 label lookups a minute from one device answer 429 with Retry-After and RateLimit headers, counted")
    func limited() async throws {
        let environment = try await TestApplication.environment(flows: BuiltinFlowsTests.flows, registry: BuiltinFlowsTests.registry())
        _ = try await environment.pool.withConnection { try await DemoData.seed($0) }
        let headers = deviceHeaders("8b9c0d1e-2f3a-4b4c-8d5e-6f7a8b9c0d1e")
        try await buildApplication(environment).test(.router) { client in
            let parcels = try await client.execute(uri: "/v3/screens/send-parcel", method: .get, headers: headers).json
            let scan = try await client.command(try #require(ScenarioRunner.payload(titled: "Drop off here", in: parcels)), headers: headers).json
            var submit = try #require(ScenarioRunner.payload(titled: "Use this code", in: scan))
            var statuses: [Int] = []
            var refused: TestResponse?
            for index in 0..<25 {
                // Unknown labels re-ask with a fresh submit action; each is one lookup.
                let answer = try await client.command(submit, input: ["text": .string("3SNOPE\(String(format: "%05d", index))")], headers: headers)
                statuses.append(Int(answer.status.code))
                if answer.status == .tooManyRequests {
                    refused = answer
                    break
                }
                submit = try #require(ScenarioRunner.payload(titled: "Use this code", in: answer.json), "\(answer.text)")
            }
            #expect(statuses.filter { $0 == 200 } .count == 20, "\(statuses)")
            let response = try #require(refused)
            #expect(response.json["error"]?["code"] == "rate_limited")
            #expect(Int(response.headers[.retryAfter] ?? "") ?? 0 >= 1)
            #expect(response.headers[HTTPField.Name("RateLimit-Policy")!] == #""device-lookups";q=20;w=60"#)
            #expect(response.headers[HTTPField.Name("RateLimit")!]?.hasPrefix(#""device-lookups";r=0;t="#) == true)
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"baton_rate_limited_total{scope="device-lookups"} 1"#))
        }
    }
}
