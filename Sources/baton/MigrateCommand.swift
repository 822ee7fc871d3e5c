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
        let database: Database
        do { database = try Database.open(configuration, logger: logger) } catch { fail("\(error)") }
        let pool = PostgresPool(configuration: .init(conninfo: database.conninfo, maxConnections: 1))
        var failure: String?
        do {
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
                    failure = "an applied migration was changed"
                }
            } else {
                let applied = try await migrator.migrate(on: pool) { print($0) }
                print(applied.isEmpty ? "up to date (\(migrator.migrations.count) migrations)" : "applied \(applied.count) migration(s)")
            }
        } catch {
            failure = "\(error)"
        }
        await pool.close()
        try? database.embedded?.stop()
        if let failure { fail(failure) }
    }
}
