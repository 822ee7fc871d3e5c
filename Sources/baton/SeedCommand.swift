import ArgumentParser
import BatonBuiltinFlows
import BatonPostgres
import BatonServer
import Foundation

struct SeedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seed",
        abstract: "Load data into the database (applies pending migrations first).",
        discussion: "baton seed demo: the public catalog, drop-off locations UT-0001…UT-0005 and shipments 3SDEMO0000001…3SDEMO0000020. Running it again changes nothing."
    )

    @Argument(help: "What to load: demo.")
    var dataset: String

    @OptionGroup var common: CommonOptions

    func run() async throws {
        guard dataset == "demo" else { fail("unknown dataset '\(dataset)' (known: demo)") }
        let configuration: BatonConfiguration
        do { configuration = try await common.loadConfiguration() } catch { fail("\(error)") }
        let logger = bootstrapLogging(configuration)
        await Database.withPool(configuration, logger: logger) { pool in
            try await Migrator(directory: URL(fileURLWithPath: configuration.migrationsDirectory)).migrate(on: pool)
            let summary = try await pool.withConnection { try await DemoData.seed($0) }
            print("demo data: \(summary)")
        }
    }
}
