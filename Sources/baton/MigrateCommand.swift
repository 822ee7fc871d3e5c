import ArgumentParser
import BatonPostgres
import BatonServer
import Foundation

struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply pending migrations from Migrations/ (or list them with --status)."
    )

    @OptionGroup var common: CommonOptions

    @Flag(help: "List applied and pending migrations without applying anything.")
    var status = false

    func run() async throws {
        let configuration: BatonConfiguration
        do { configuration = try await common.loadConfiguration() } catch { fail("\(error)") }
        let logger = bootstrapLogging(configuration)
        await Database.withPool(configuration, logger: logger) { pool in
            let migrator = try Migrator(directory: URL(fileURLWithPath: configuration.migrationsDirectory))
            if status {
                let statuses = try await migrator.status(on: pool)
                for entry in statuses {
                    let name = String(format: "%04d_%@", entry.version, entry.name)
                    switch entry.state {
                    case .applied(let at): print("applied   \(name)  (\(at.formatted(.iso8601)))")
                    case .pending: print("pending   \(name)")
                    case .changed: print("CHANGED   \(name)  (file edited after it was applied)")
                    case .missingFile: print("applied   \(name)  (no file in this build)")
                    }
                }
                if statuses.contains(where: { if case .changed = $0.state { true } else { false } }) {
                    throw CommandFailure("an applied migration was changed")
                }
            } else {
                let applied = try await migrator.migrate(on: pool) { print($0) }
                print(applied.isEmpty ? "up to date (\(migrator.migrations.count) migrations)" : "applied \(applied.count) migration(s)")
            }
        }
    }
}
