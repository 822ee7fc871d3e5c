import ArgumentParser
import BatonBuiltinFlows
import BatonContract
import BatonFlows
import BatonPostgres
import BatonRuntime
import BatonScenarios
import BatonServer
import Foundation
import Logging

extension FlowsCommand {
    struct TestCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "test",
            abstract: "Run the scenarios in Flows/tests/ against a throwaway database with the demo data.",
            discussion: "Each scenario gets a fresh database. Exit 1 if any step fails."
        )

        @OptionGroup var flows: FlowsDirectoryOption

        @Option(help: "The scenarios directory (default: <flows-dir>/tests).")
        var scenarios: String?

        /// Deprecated: the scenarios directory, which other `flows` commands' positional
        /// (the flows directory) was easily mistaken for.
        @Argument(help: .hidden)
        var directory: String?

        @Option(help: "Only scenarios whose name contains this text.")
        var filter: String?

        @Option(help: "Migrations directory (BATON_MIGRATIONS_DIR; default: found beside the install or in the package).")
        var migrationsDir: String?

        func run() async throws {
            let flowsDir = flows.directory()
            if let directory, scenarios == nil {
                warn("the scenarios directory as an argument is deprecated; write `baton flows test --scenarios \(directory)`")
            }
            let definitions = loadDefinitions(flowsDir)
            let bundle = definitions.bundle
            if !definitions.isServable {
                definitions.diagnostics.filter { $0.severity == .error }.forEach { print($0) }
                fail("the flows do not lint; fix them first")
            }
            let testsDirectory = URL(fileURLWithPath: scenarios ?? directory ?? (flowsDir + "/tests")).standardizedFileURL
            var (scenarios, diagnostics) = Scenario.loadAll(directory: testsDirectory)
            diagnostics.forEach { print($0) }
            if diagnostics.hasErrors { fail("the scenarios do not load") }
            if let filter { scenarios = scenarios.filter { $0.name.localizedCaseInsensitiveContains(filter) } }
            guard !scenarios.isEmpty else { fail("no scenarios in \(testsDirectory.path)") }

            var logger = Logger(label: "baton-flows-test")
            logger.logLevel = .critical
            let cluster = EmbeddedPostgres(
                configuration: .init(
                    directory: URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("baton-flows-test-\(getpid())"),
                    databaseName: "postgres", settings: ["fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"]))
            let admin: String
            do {
                admin = try cluster.start()
                try cluster.stopWhenThisProcessExits(removeDirectory: true)
                _ = try cluster.createDatabase("scenario_template")
            } catch { fail("could not start a throwaway PostgreSQL: \(error)") }
            defer { try? cluster.forceStop() }

            let templatePool = PostgresPool(configuration: .administrative(conninfo: try Conninfo.replacing(admin, with: ["dbname": "scenario_template"])))
            let migrations = migrationsDir ?? ProcessInfo.processInfo.environment["BATON_MIGRATIONS_DIR"] ?? MigrationsLocation.find()
            try await Migrator(directory: URL(fileURLWithPath: migrations)).migrate(on: templatePool)
            _ = try await templatePool.withConnection { try await DemoData.seed($0) }
            await templatePool.close()

            let registry = applicationRegistry()
            var failed = 0
            for (index, scenario) in scenarios.enumerated() {
                let conninfo = try cluster.createDatabase("scenario_\(index)", template: "scenario_template")
                let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 4))
                let signer = try PayloadSigner(keys: [("test", (0..<32).map { _ in UInt8.random(in: 0...255) })])
                let fitter = definitions.fitter(metrics: BatonMetrics(), buckets: ClientBuckets(), logger: logger)!
                let services = ScenarioServices(stubs: scenario.services)
                let runtime = FlowRuntime(
                    bundle: bundle, registry: registry, pool: pool, signer: signer, fitter: fitter, logger: logger, services: services)
                try await runtime.publishDefinitions()
                let result = await ScenarioRunner(runtime: runtime, pool: pool, services: services).run(scenario)
                await pool.close()
                if result.passed {
                    print("✓ \(scenario.name)  (\(scenario.file), \(result.stepsRun) steps)")
                } else {
                    failed += 1
                    print("✗ \(scenario.name)  (\(scenario.file))")
                    for failure in result.failures { print("    \(failure)") }
                }
            }
            print("\(scenarios.count - failed) of \(scenarios.count) scenario(s) passed")
            if failed > 0 { throw ExitCode(1) }
        }
    }
}
