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
        // Every service has an image to run or a build to make one.
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

    /// A service's `./source:/target[:mode]` volumes.
    func bindMounts(_ service: [String: Any]) -> [(source: String, target: String)] {
        (service["volumes"] as? [String] ?? []).compactMap { volume in
            let parts = volume.split(separator: ":").map(String.init)
            guard parts.count >= 2, parts[0].hasPrefix("./") else { return nil }
            return (parts[0], parts[1])
        }
    }

    /// Container ports a service publishes on the same host port.
    func publishedPorts(_ service: [String: Any]) -> Set<Int> {
        Set((service["ports"] as? [String] ?? []).compactMap { entry in
            let parts = entry.split(separator: ":")
            guard parts.count >= 2, parts[parts.count - 1] == parts[parts.count - 2] else { return nil }
            return Int(parts[parts.count - 1])
        })
    }

    func yaml(_ relativePath: String) throws -> [String: Any] {
        let text = try String(contentsOf: root.appendingPathComponent(relativePath), encoding: .utf8)
        guard let document = try Yams.load(yaml: text) as? [String: Any] else { throw TestFailure("\(relativePath) is not a YAML mapping") }
        return document
    }

    @Test("docker-compose.yml: Prometheus and Grafana only with --profile observability, wired to Baton, to each other and to ops/")
    func composeObservability() throws {
        let document = try compose()
        let services = try #require(document["services"] as? [String: Any])
        for name in ["postgres", "baton"] {
            #expect((services[name] as? [String: Any])?["profiles"] == nil, "\(name) must start with a plain `docker compose up`")
        }
        let prometheus = try #require(services["prometheus"] as? [String: Any])
        let grafana = try #require(services["grafana"] as? [String: Any])
        #expect(prometheus["profiles"] as? [String] == ["observability"])
        #expect(grafana["profiles"] as? [String] == ["observability"])
        #expect((prometheus["image"] as? String)?.hasPrefix("prom/prometheus") == true)
        #expect((grafana["image"] as? String)?.hasPrefix("grafana/grafana") == true)
        #expect(publishedPorts(prometheus).contains(9090))
        #expect(publishedPorts(grafana).contains(3000))
        let namedVolumes = Set((document["volumes"] as? [String: Any] ?? [:]).keys)
        for (name, service) in [("prometheus", prometheus), ("grafana", grafana)] {
            for volume in service["volumes"] as? [String] ?? [] where !volume.hasPrefix("./") {
                let source = String(volume.split(separator: ":")[0])
                #expect(namedVolumes.contains(source), "\(name) uses volume \(source), which is not declared")
            }
        }

        // Prometheus reads the mounted configuration, its rule files are mounted beside it, and
        // it scrapes Baton by service name on the port Baton listens on.
        let prometheusMounts = bindMounts(prometheus)
        let configFlag = (prometheus["command"] as? [String] ?? []).first { $0.hasPrefix("--config.file=") }
        let configPath = configFlag.map { String($0.dropFirst("--config.file=".count)) } ?? "/etc/prometheus/prometheus.yml"
        let configMount = try #require(prometheusMounts.first { $0.target == configPath }, "nothing is mounted at \(configPath)")
        #expect(configMount.source == "./ops/prometheus/prometheus.yml")
        let configuration = try yaml(configMount.source)
        let ruleFiles = configuration["rule_files"] as? [String] ?? []
        #expect(!ruleFiles.isEmpty)
        let configDirectory = (configPath as NSString).deletingLastPathComponent
        for file in ruleFiles {
            let target = file.hasPrefix("/") ? file : configDirectory + "/" + file
            #expect(prometheusMounts.contains { $0.target == target }, "rule file \(file) (\(target)) is not mounted")
        }
        let scrapeConfigs = configuration["scrape_configs"] as? [[String: Any]] ?? []
        let staticConfigs = scrapeConfigs.flatMap { $0["static_configs"] as? [[String: Any]] ?? [] }
        let targets = staticConfigs.flatMap { $0["targets"] as? [String] ?? [] }
        let batonPort = try #require(((services["baton"] as? [String: Any])?["environment"] as? [String: Any])?["HTTP_PORT"] as? String)
        #expect(targets == ["baton:\(batonPort)"])

        // Grafana: the provisioned datasource is the Prometheus service, the dashboard provider
        // reads the directory the dashboard is mounted into.
        let grafanaMounts = bindMounts(grafana)
        let datasourcesMount = try #require(grafanaMounts.first { $0.target == "/etc/grafana/provisioning/datasources" })
        let providersMount = try #require(grafanaMounts.first { $0.target == "/etc/grafana/provisioning/dashboards" })
        let datasources = try yaml(datasourcesMount.source + "/prometheus.yml")["datasources"] as? [[String: Any]] ?? []
        let datasource = try #require(datasources.first { $0["type"] as? String == "prometheus" })
        #expect(datasource["url"] as? String == "http://prometheus:9090")
        #expect(datasource["uid"] as? String == "prometheus")
        let providers = try yaml(providersMount.source + "/baton.yml")["providers"] as? [[String: Any]] ?? []
        let providerPath = try #require((providers.first?["options"] as? [String: Any])?["path"] as? String)
        let dashboardMount = try #require(grafanaMounts.first { $0.source == "./ops/grafana/baton.json" }, "the dashboard is not mounted")
        #expect(
            dashboardMount.target == providerPath + "/baton.json",
            "the provider reads \(providerPath), the dashboard is at \(dashboardMount.target)")
        let environment = grafana["environment"] as? [String: Any] ?? [:]
        if let home = environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] as? String {
            #expect(home == dashboardMount.target)
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
