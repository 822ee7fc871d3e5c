import ArgumentParser
import BatonFlows
import BatonPostgres
import BatonServer
import Foundation

/// Who publishes: the operating-system user on this host (recorded with every release change).
private func actor() -> String {
    "\(ProcessInfo.processInfo.environment["USER"] ?? "unknown")@\(ProcessInfo.processInfo.hostName)"
}

/// Waits up to `timeout` for replicas to report `version` (until a second has passed with no
/// new report after the first one), then prints what they said. Returns false when a replica
/// could not load the release.
private func awaitReports(_ pool: PostgresPool, version: Int, timeout: Double) async throws -> Bool {
    guard timeout > 0 else { return true }
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    var reports: [ReleaseStore.Report] = []
    var lastNew = ContinuousClock.now
    while ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(200))
        let now = try await pool.withConnection { try await ReleaseStore.reports($0, version: version) }
        if now.count > reports.count { lastNew = .now }
        reports = now
        if !reports.isEmpty, ContinuousClock.now - lastNew > .seconds(1) { break }
    }
    if reports.isEmpty {
        print("no replica has reported yet (replicas re-check at least every BATON_FLOWS_CHECK_INTERVAL seconds)")
        return true
    }
    for report in reports {
        print("  \(report.ok ? "✓" : "✗") \(report.replica): \(report.ok ? "serving \(report.release.prefix(12))" : report.detail)")
    }
    return !reports.contains { !$0.ok }
}

/// `--wait` is checked before anything is changed: a value the wait cannot count (inf, nan,
/// 1e16) used to end the process after the change had been committed.
private func validateWait(_ wait: Double) throws {
    guard wait.isFinite, (0...3600).contains(wait) else { throw ValidationError("--wait must be 0–3600 seconds; got \(wait)") }
}

/// Runs one change of the release state, prints it, and waits for the replicas' reports.
private func changeRelease(
    _ common: CommonOptions, wait: Double, describe: @escaping @Sendable (ReleaseStore.State) -> String,
    _ change: @escaping @Sendable (PostgresConnection) async throws -> ReleaseStore.State
) async {
    let configuration: BatonConfiguration
    do { configuration = try await common.loadConfiguration() } catch { fail("\(error)") }
    let logger = bootstrapLogging(configuration)
    let ok = await Database.withPool(configuration, logger: logger, work: .brief) { pool in
        let state = try await pool.withTransaction(change)
        print("\(describe(state)) (state v\(state.version))")
        return try await awaitReports(pool, version: state.version, timeout: wait)
    }
    if !ok { fail("a replica could not load the release; it keeps serving the previous one (see /readyz there)") }
}

extension FlowsCommand {
    struct PublishCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "publish",
            abstract: "Lint a flows directory and publish it as the current release (or ramp it to a share of new sessions)."
        )

        @OptionGroup var common: CommonOptions

        @OptionGroup var flows: FlowsDirectoryOption

        @Argument(help: .hidden)
        var positionalDirectory: String?

        @Option(help: "Why: shown by `baton flows releases` and on the dashboard.")
        var message: String = ""

        @Option(help: "Start only this percentage (1–100; 100 is a plain publish) of new sessions of the changed flows on the new release.")
        var ramp: Int?

        @Option(help: "Seconds to wait for replicas to report the new release (0: do not wait).")
        var wait: Double = 5

        func validate() throws { try validateWait(wait) }

        func run() async throws {
            if let ramp, !(1...100).contains(ramp) { fail("--ramp must be 1–100") }
            let configuration: BatonConfiguration
            do { configuration = try await common.loadConfiguration() } catch { fail("\(error)") }
            let directory = flows.directory(
                positional: positionalDirectory, usage: "baton flows publish DIR", configured: configuration.flowsDirectory)
            let definitions = loadDefinitions(directory)
            let errors = definitions.diagnostics.filter { $0.severity == .error }
            guard errors.isEmpty, definitions.isServable else {
                for diagnostic in definitions.diagnostics { print(diagnostic) }
                fail("\(errors.count) lint error(s): nothing was published")
            }
            let files: ReleaseFiles
            do { files = try ReleaseFiles.read(directory: URL(fileURLWithPath: directory)) } catch { fail("\(error)") }
            let logger = bootstrapLogging(configuration)
            let ok = await Database.withPool(configuration, logger: logger, work: .brief) { pool in
                let state = try await pool.withTransaction { [message, ramp] in
                    try await ReleaseStore.publish($0, files, message: message, actor: actor(), rampPercent: ramp)
                }
                let id = files.id
                if state.ramp != nil {
                    print("release \(id.prefix(12)) ramping: \(state.rampPercent)% of new sessions of changed flows (state v\(state.version))")
                } else {
                    print("release \(id.prefix(12)) is current (state v\(state.version))")
                }
                return try await awaitReports(pool, version: state.version, timeout: wait)
            }
            if !ok { fail("a replica could not load the release; it keeps serving the previous one (see /readyz there)") }
        }
    }

    struct ReleasesCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "releases", abstract: "List published releases, newest first.")

        @OptionGroup var common: CommonOptions

        func run() async throws {
            let configuration: BatonConfiguration
            do { configuration = try await common.loadConfiguration() } catch { fail("\(error)") }
            let logger = bootstrapLogging(configuration)
            let releases = await Database.withPool(configuration, logger: logger, work: .brief) { pool in
                try await pool.withConnection { try await ReleaseStore.list($0) }
            }
            if releases.isEmpty { print("no releases: replicas serve the flows directory") }
            let formatter = ISO8601DateFormatter()
            for release in releases {
                let mark = release.isCurrent ? "* current" : release.rampPercent.map { "~ ramp \($0)%" } ?? "         "
                print("\(mark)  \(release.id.prefix(12))  \(formatter.string(from: release.publishedAt))  \(release.publishedBy)  \(release.message)")
            }
        }
    }

    struct DiffCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "diff", abstract: "What publishing a flows directory would change against a release (default: the current one).")

        @OptionGroup var common: CommonOptions

        @OptionGroup var flows: FlowsDirectoryOption

        @Argument(help: "The release (id or prefix; default: current). A directory after it (deprecated: use --flows-dir) is the flows directory.")
        var arguments: [String] = []

        func run() async throws {
            var rest = arguments
            guard rest.count <= 2 else { fail("usage: baton flows diff [RELEASE] [--flows-dir DIR]") }
            var isDirectory: ObjCBool = false
            var positional: String?
            if let last = rest.last, FileManager.default.fileExists(atPath: last, isDirectory: &isDirectory), isDirectory.boolValue {
                positional = rest.removeLast()
            }
            let configuration: BatonConfiguration
            do { configuration = try await common.loadConfiguration() } catch { fail("\(error)") }
            let flowsDir = flows.directory(
                positional: positional, usage: "baton flows diff \(rest.first.map { "\($0) " } ?? "")DIR",
                configured: configuration.flowsDirectory)
            let release = rest.first
            let files: ReleaseFiles
            do { files = try ReleaseFiles.read(directory: URL(fileURLWithPath: flowsDir)) } catch { fail("\(error)") }
            let logger = bootstrapLogging(configuration)
            let old = await Database.withPool(configuration, logger: logger, work: .brief) { [release] pool in
                try await pool.withConnection { db -> ReleaseFiles in
                    let id: String
                    if let release { id = try await ReleaseStore.resolve(db, release) } else {
                        guard let current = try await ReleaseStore.state(db).current else { return ReleaseFiles(files: [:]) }
                        id = current
                    }
                    return try await ReleaseStore.files(db, release: id)
                }
            }
            let changes = files.diff(from: old)
            if changes.isEmpty { print("no changes") }
            for change in changes {
                print("\(change.kind.rawValue) \(change.path)")
                for line in change.lines.prefix(200) { print("    \(line)") }
            }
        }
    }

    struct RollbackCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rollback",
            abstract: "End a ramp, or make an earlier release (default: the one before the current) current again.")

        @OptionGroup var common: CommonOptions

        @Argument(help: "The release to make current (id or prefix).")
        var release: String?

        @Option(help: "Seconds to wait for replicas to report (0: do not wait).")
        var wait: Double = 5

        func validate() throws { try validateWait(wait) }

        func run() async throws {
            await changeRelease(common, wait: wait, describe: { "release \($0.current?.prefix(12) ?? "none") is current; no ramp" }) {
                [release] in try await ReleaseStore.rollback($0, to: release, actor: actor())
            }
        }
    }

    struct PromoteCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "promote", abstract: "Move the ramping release to 100%: it becomes current.")

        @OptionGroup var common: CommonOptions

        @Option(help: "Seconds to wait for replicas to report (0: do not wait).")
        var wait: Double = 5

        func validate() throws { try validateWait(wait) }

        func run() async throws {
            await changeRelease(common, wait: wait, describe: { "release \($0.current?.prefix(12) ?? "none") is current for everyone" }) {
                try await ReleaseStore.promote($0, actor: actor())
            }
        }
    }
}
