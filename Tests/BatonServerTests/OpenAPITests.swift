import BatonJSON
import BatonServer
import BatonTestSupport
import Foundation
import HummingbirdTesting
import Testing

@Suite("OpenAPI document")
struct OpenAPITests {
    /// Hummingbird's `/:version/command` is OpenAPI's `/{version}/command`.
    static func openAPIPath(_ path: String) -> String {
        path.split(separator: "/").map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
            .reduce("") { $0 + "/" + $1 }
    }

    @Test("/openapi.json is a valid OpenAPI 3.1 document (checked by openapi-spec-validator)")
    func valid() async throws {
        let app = buildApplication(try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry()))
        let body = try await app.test(.router) { client in
            try await client.execute(uri: "/openapi.json", method: .get) { $0.text }
        }
        let document = try JSONValue.parse(Array(body.utf8))
        #expect(document["openapi"] == "3.1.0")
        guard let validator = ExternalTool.find("openapi-spec-validator") ?? ExternalTool.findInToolsVenv("openapi-spec-validator") else {
            Issue.record("openapi-spec-validator not found: run scripts/bootstrap.sh --test")
            return
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("openapi-\(UUID().uuidString).json")
        try body.write(to: file, atomically: true, encoding: .utf8)
        let result = try await ExternalTool.run(validator, [file.path])
        #expect(result.status == 0, "\(result.output)")
    }

    @Test("every route the server registers is described, and nothing described is missing")
    func routesDocumented() async throws {
        let environment = try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry())
        let app = buildApplication(environment)
        let body = try await app.test(.router) { client in
            try await client.execute(uri: "/openapi.json", method: .get) { $0.text }
        }
        let paths = try JSONValue.parse(Array(body.utf8))["paths"]?.objectValue ?? [:]
        var registered = Set<String>()
        for route in environment.routes.all {
            let path = Self.openAPIPath(route.path)
            let method = route.method.rawValue.lowercased()
            registered.insert("\(method) \(path)")
            #expect(paths[path]?[method] != nil, "\(route.method) \(route.path) is not in /openapi.json")
        }
        for (path, item) in paths {
            for method in item.objectValue?.keys ?? [] where ["get", "post", "put", "patch", "delete"].contains(method) {
                #expect(registered.contains("\(method) \(path)"), "/openapi.json describes \(method) \(path), which no route serves")
            }
        }
    }
}
