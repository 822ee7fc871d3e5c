import BatonFlows
import BatonPostgres
import BatonRuntime
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// Keeps a replica serving the current flows: the current published release (heard of through
/// `LISTEN baton_releases`, re-checked on every reconnect and on a slow timer, so a missed
/// notification costs at most one interval), or `Flows/` on disk, reloaded on change with
/// `--watch`.
///
/// A bundle that does not load never replaces the one being served: the replica keeps serving
/// the previous one, says so on `/readyz` and in `baton_flows_reloads_total{result="failed"}`,
/// and reports the failure in `flow_release_reports`, where the publisher reads it.
public final class ReleaseWatcher: Service, Sendable {
    /// What the watcher needs from the server.
    public struct Context: Sendable {
        public var runtime: FlowRuntime
        public var live: LiveDefinitions
        public var pool: PostgresPool
        public var metrics: BatonMetrics
        public var buckets: ClientBuckets
        public var logger: Logger
        public var configuration: BatonConfiguration
    }

    private let context: Context
    private struct State {
        /// The release-state version last served (nil: not yet checked).
        var version: Int?
        /// Loaded releases by id, newest last: a rollback to one of them is a swap, not a load.
        var cache: [(id: String, definitions: FlowDefinitions)] = []
        /// The content id of `Flows/` last served from disk.
        var filesID: String?
        var servingRelease = false
        /// The first check, which the server waits for before it listens.
        var first: Task<Void, Never>?
    }
    private let state = Mutex(State())
    private let wake: AsyncStream<Void>
    private let wakeUp: AsyncStream<Void>.Continuation

    public init(_ context: Context) {
        self.context = context
        (wake, wakeUp) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Checks now (tests and `--watch` call this; the loop calls it on every wake-up).
    public func check() async {
        let configuration = context.configuration
        if configuration.flowsSource != .files {
            let current: ReleaseStore.State
            do {
                current = try await context.pool.withConnection { try await ReleaseStore.state($0) }
            } catch {
                context.logger.warning("could not read the release state", metadata: ["error": "\(error)"])
                return
            }
            if current.current != nil {
                guard state.withLock({ $0.version }) != current.version else { return }
                await serve(current)
                return
            }
            state.withLock { $0.version = current.version }
        }
        if configuration.watchFlows { await reloadFiles() }
    }

    /// The first check, once, however many callers ask: the server runs it before it listens
    /// (``buildApplication``), so a replica never answers from `Flows/` on disk while a release
    /// is current; `run` waits for the same one.
    public func firstCheck() async {
        let task = state.withLock { state in
            if let first = state.first { return first }
            let first = Task { await self.check() }
            state.first = first
            return first
        }
        await task.value
    }

    public func run() async throws {
        // Serve the current release before anything else, not on the first notification.
        await firstCheck()
        let listener: PostgresListener? =
            context.configuration.flowsSource == .files
            ? nil
            : PostgresListener(conninfo: context.pool.configuration.conninfo, channel: ReleaseStore.channel) { [wakeUp, logger = context.logger] event in
                switch event {
                case .connected, .notification: wakeUp.yield()
                case .disconnected(let reason): logger.info("release listener disconnected; reconnecting", metadata: ["reason": .string(reason)])
                }
            }
        listener?.start()
        let interval = context.configuration.watchFlows ? .seconds(1) : context.configuration.releaseCheckInterval
        let timer = Task { [wakeUp] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                wakeUp.yield()
            }
        }
        await withGracefulShutdownHandler {
            for await _ in wake { await check() }
        } onGracefulShutdown: { [wakeUp] in
            wakeUp.finish()
        }
        timer.cancel()
        await listener?.stop()
    }

    // MARK: - Serving

    private func serve(_ current: ReleaseStore.State) async {
        guard let id = current.current else { return }
        let wanted = current.ramp ?? id
        do {
            let base = try await definitions(for: id)
            var ramp: FlowDefinitions?
            if let rampID = current.ramp { ramp = try await definitions(for: rampID) }
            try await swap(to: base, release: id, ramp: ramp.map { ($0, current.ramp!, current.rampPercent) })
            state.withLock {
                $0.version = current.version
                $0.servingRelease = true
            }
            context.logger.info(
                "serving flows release",
                metadata: ["release": .string(String(id.prefix(12))), "ramp": .string(current.ramp.map { "\($0.prefix(12)) at \(current.rampPercent)%" } ?? "none")])
            await report(current, release: wanted, ok: true, detail: "")
        } catch {
            // Keep serving what we have; say so wherever someone looks.
            context.live.failed(release: wanted, reason: "\(error)")
            context.metrics.recordReload(ok: false)
            context.logger.error(
                "could not load flows release; still serving the previous one",
                metadata: ["release": .string(String(wanted.prefix(12))), "error": "\(error)"])
            // A database that failed us is no verdict on the release: the next check (the
            // timer, a notification, the listener's reconnect) tries again. Any other failure
            // is the release's own and would only fail again, until the state changes.
            if !(error is PostgresError) { state.withLock { $0.version = current.version } }
            await report(current, release: wanted, ok: false, detail: "\(error)")
        }
    }

    /// Serves other definitions: the runtime's flows and the server's contract and allowlist
    /// together, the definitions stored by hash, the metrics told. One way, for releases and files.
    private func swap(to base: FlowDefinitions, release: String, ramp: (definitions: FlowDefinitions, id: String, percent: Int)?) async throws {
        let shown = ramp?.definitions ?? base
        guard let contract = shown.contract,
            let fitter = shown.fitter(metrics: context.metrics, buckets: context.buckets, logger: context.logger)
        else { throw ReleaseError("release \((ramp?.id ?? release).prefix(12)) has no contract") }
        try await context.runtime.serve(
            bundle: base.bundle, fitter: fitter, release: release, ramp: ramp.map { ($0.definitions.bundle, $0.id, $0.percent) })
        context.live.serve(
            LiveDefinitions.Served(
                contract: contract, allowlist: shown.allowlist, release: release, ramp: ramp?.id, rampPercent: ramp?.percent ?? 0))
        context.metrics.prepare(flows: context.runtime.bundle.flows.keys.sorted())
        context.metrics.recordLoadedFlows(context.runtime.bundle.flows.mapValues(\.hash))
        context.metrics.recordRelease(release, ramp: ramp?.id)
        context.metrics.recordReload(ok: true)
    }

    private func report(_ current: ReleaseStore.State, release: String, ok: Bool, detail: String) async {
        let replica = context.configuration.replicaName
        do {
            try await context.pool.withConnection {
                try await ReleaseStore.report($0, replica: replica, version: current.version, release: release, ok: ok, detail: detail)
            }
        } catch {
            context.logger.warning("could not report the release state", metadata: ["error": "\(error)"])
        }
    }

    /// A release's definitions, loaded through the same code that loads `Flows/` from disk.
    private func definitions(for id: String) async throws -> FlowDefinitions {
        if let cached = state.withLock({ $0.cache.first { $0.id == id }?.definitions }) { return cached }
        let files = try await context.pool.withConnection { try await ReleaseStore.files($0, release: id) }
        let definitions = try Self.load(files, catalog: context.runtime.catalog)
        state.withLock { state in
            state.cache.append((id, definitions))
            if state.cache.count > 8 { state.cache.removeFirst() }
        }
        return definitions
    }

    /// Loads release files; throws with the diagnostics when they cannot be served.
    public static func load(_ files: ReleaseFiles, catalog: FlowCatalog) throws -> FlowDefinitions {
        let directory = try files.materialize()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let definitions = FlowDefinitions.load(directory: directory, catalog: catalog)
        guard definitions.isServable else {
            let errors = definitions.diagnostics.filter { $0.severity == .error }.prefix(10).map(\.description)
            throw ReleaseError(
                "release \(files.id.prefix(12)) does not load here: "
                    + (errors.isEmpty ? "its contract or deep-link allowlist is missing" : errors.joined(separator: "; ")))
        }
        return definitions
    }

    // MARK: - Files (--watch)

    private func reloadFiles() async {
        let directory = URL(fileURLWithPath: context.configuration.flowsDirectory)
        guard let files = try? ReleaseFiles.read(directory: directory) else { return }
        let id = files.id
        let (known, servingRelease) = state.withLock { ($0.filesID, $0.servingRelease) }
        guard !servingRelease, known != id else { return }
        if known == nil {
            state.withLock { $0.filesID = id }
            return  // what serve started with
        }
        let definitions = FlowDefinitions.load(directory: directory, catalog: context.runtime.catalog)
        guard definitions.isServable else {
            let errors = definitions.diagnostics.filter { $0.severity == .error }
            for error in errors { FileHandle.standardError.write(Data("\(error)\n".utf8)) }
            context.live.failed(release: "files", reason: errors.prefix(5).map(\.description).joined(separator: "; "))
            context.metrics.recordReload(ok: false)
            context.logger.error("Flows/ changed but does not lint; still serving the previous bundle", metadata: ["errors": .stringConvertible(errors.count)])
            state.withLock { $0.filesID = id }  // the same files would fail the same way: wait for the next edit
            return
        }
        do {
            try await swap(to: definitions, release: "files", ramp: nil)
        } catch {
            // Storing the definitions failed (the database): the next check tries again.
            context.live.failed(release: "files", reason: "\(error)")
            context.metrics.recordReload(ok: false)
            context.logger.error("Flows/ changed but could not be served; trying again", metadata: ["error": "\(error)"])
            return
        }
        state.withLock { $0.filesID = id }
        context.logger.info("Flows/ changed; serving the new bundle", metadata: ["flows": .stringConvertible(definitions.bundle.flows.count)])
    }
}
