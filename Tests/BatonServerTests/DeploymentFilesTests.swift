import BatonTestSupport
import Foundation
import Testing
import Yams

/// No Docker engine runs where the tests do, so the deployment files are checked as data:
/// valid YAML, the structure Compose needs, and references to files that exist.
@Suite("Deployment files")
struct DeploymentFilesTests {
    let root = TestDatabase.repositoryRoot

    func compose() throws -> [String: Any] {
        let text = try String(contentsOf: root.appendingPathComponent("docker-compose.yml"), encoding: .utf8)
        guard let document = try Yams.load(yaml: text) as? [String: Any] else {
            throw TestFailure("docker-compose.yml is not a YAML mapping")
        }
        return document
    }

    @Test("docker-compose.yml: PostgreSQL with a health check, Baton built from the Dockerfile and started once it is healthy")
    func composeStructure() throws {
        let document = try compose()
        let services = try #require(document["services"] as? [String: Any])
        let postgres = try #require(services["postgres"] as? [String: Any])
        let healthcheck = try #require(postgres["healthcheck"] as? [String: Any])
        let test = try #require(healthcheck["test"] as? [String])
        #expect(test.joined(separator: " ").contains("pg_isready"))

        let baton = try #require(services["baton"] as? [String: Any])
        let build = try #require(baton["build"] as? [String: Any])
        let dockerfile = try #require(build["dockerfile"] as? String)
        let context = try #require(build["context"] as? String)
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent(context).appendingPathComponent(dockerfile).path))
        let dependsOn = try #require(baton["depends_on"] as? [String: Any])
        #expect((dependsOn["postgres"] as? [String: Any])?["condition"] as? String == "service_healthy")
        let environment = try #require(baton["environment"] as? [String: Any])
        let url = try #require(environment["DATABASE_URL"] as? String)
        #expect(url.contains("@postgres:5432/"), "Baton must reach the compose service by name")
        #expect(environment["HTTP_HOST"] as? String == "0.0.0.0", "a container must listen beyond loopback")
        // Every service is either a known one or lives in a profile.
        for (name, value) in services {
            let service = try #require(value as? [String: Any], "\(name)")
            #expect(service["image"] != nil || service["build"] != nil, "\(name) has neither image nor build")
        }
    }

    @Test("files mounted into compose services exist in the repository")
    func composeMounts() throws {
        let services = try #require(try compose()["services"] as? [String: Any])
        for (name, value) in services {
            let volumes = (value as? [String: Any])?["volumes"] as? [String] ?? []
            for volume in volumes {
                let source = String(volume.split(separator: ":")[0])
                guard source.hasPrefix("./") else { continue }
                #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent(source).path), "\(name) mounts \(source), which does not exist")
            }
        }
    }

    @Test("the Dockerfile is multi-stage, copies only paths that exist, and migrates on start")
    func dockerfile() throws {
        let text = try String(contentsOf: root.appendingPathComponent("Dockerfile"), encoding: .utf8)
        let froms = text.split(separator: "\n").filter { $0.hasPrefix("FROM ") }
        #expect(froms.count >= 2, "expected a build stage and a runtime stage")
        for line in text.split(separator: "\n") where line.hasPrefix("COPY ") && !line.contains("--from") {
            let parts = line.split(separator: " ").dropFirst()
            for source in parts.dropLast() {
                #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent(String(source)).path), "COPY \(source): missing")
            }
        }
        #expect(text.contains("CMD [\"serve\"]"))
        #expect(text.contains("libpq"))
    }
}
