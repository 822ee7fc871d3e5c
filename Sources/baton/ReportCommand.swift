import ArgumentParser
import BatonFlows
import BatonPostgres
import BatonServer
import Configuration
import Foundation

struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Reports from the database.",
        subcommands: [ContractReportCommand.self]
    )

    struct ContractReportCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "contract",
            abstract: "Contract health per app version: components served without fallback, and whether the current flows render fully.",
            discussion: """
                Reads the daily rollup every replica writes (contract_health_daily). "without fallback" is the share of \
                components sent that were not a fallback; "current flows" checks today's Flows/ against the contract \
                version the app speaks (with every capability).
                """
        )

        @Option(help: "How many days back, today (UTC) included.")
        var days: Int = 30

        @Flag(help: "Print CSV instead of a table.")
        var csv = false

        @Option(help: "Also write an SVG bar chart to this file.")
        var svg: String?

        @Option(help: "The flows directory to judge (BATON_FLOWS_DIR, default Flows).")
        var flowsDir: String?

        @OptionGroup var common: CommonOptions

        func validate() throws {
            guard (1...3660).contains(days) else { throw ValidationError("--days must be 1–3660") }
        }

        func run() async throws {
            let configuration: BatonConfiguration
            // Only warnings in the log: the output is the report (CSV goes to pipes).
            let quiet: [AbsoluteConfigKey: ConfigValue] =
                common.logLevel == nil && ProcessInfo.processInfo.environment["LOG_LEVEL"] == nil
                ? [AbsoluteConfigKey(["log", "level"]): "warning"] : [:]
            do { configuration = try await common.loadConfiguration(extra: quiet) } catch { fail("\(error)") }
            let definitions = loadDefinitions(flowsDir ?? configuration.flowsDirectory)
            guard let contract = definitions.contract, !definitions.diagnostics.hasErrors else {
                fail("\(flowsDir ?? configuration.flowsDirectory) has errors (see `baton flows lint`); the report judges the flows, so fix them first")
            }
            let logger = bootstrapLogging(configuration)
            let report = await Database.withPool(configuration, logger: logger) { pool in
                try await ContractHealthReport.load(days: days, pool: pool, bundle: definitions.bundle, contract: contract)
            }
            print(csv ? report.csv : report.text, terminator: "")
            if let svg {
                do { try Data(report.svg.utf8).write(to: URL(fileURLWithPath: svg)) } catch { fail("cannot write \(svg): \(error)") }
                FileHandle.standardError.write(Data("wrote \(svg)\n".utf8))
            }
        }
    }
}
