import BatonContract
import BatonJSON
import BatonPostgres
import Foundation
import Synchronization

/// The durable side of the contract metrics: per UTC day and client bucket (platform, contract
/// version, app major.minor), how many screens and replies were fitted, components rendered,
/// fallback hits and omissions, and update-required answers.
///
/// Requests only add to counts in memory; ``flush(to:)`` writes everything gathered since the
/// last flush as one statement, one additive upsert per bucket, so the database sees at most
/// one write per bucket per interval whatever the traffic, and several replicas add into the
/// same rows safely. A flush that fails puts its counts back for the next one.
public final class ContractHealthRollup: Sendable {
    /// One row of `contract_health_daily`.
    public struct Bucket: Hashable, Sendable, Comparable {
        /// Days since 1970-01-01, UTC.
        public var day: Int
        public var platform: String
        public var contract: Int
        public var appVersion: String

        public static func < (a: Bucket, b: Bucket) -> Bool {
            (a.day, a.platform, a.contract, a.appVersion) < (b.day, b.platform, b.contract, b.appVersion)
        }
    }

    public struct Counts: Equatable, Sendable {
        public var requests = 0
        public var rendered = 0
        public var fallbackHits = 0
        public var omissions = 0
        public var unsupported = 0

        public init(requests: Int = 0, rendered: Int = 0, fallbackHits: Int = 0, omissions: Int = 0, unsupported: Int = 0) {
            self.requests = requests
            self.rendered = rendered
            self.fallbackHits = fallbackHits
            self.omissions = omissions
            self.unsupported = unsupported
        }

        static func += (a: inout Counts, b: Counts) {
            a.requests += b.requests
            a.rendered += b.rendered
            a.fallbackHits += b.fallbackHits
            a.omissions += b.omissions
            a.unsupported += b.unsupported
        }
    }

    private let pending = Mutex<[Bucket: Counts]>([:])
    private let written = Atomic<Int>(0)
    private let now: @Sendable () -> Date

    /// - Parameter now: the clock that decides the day a request counts for (tests move it).
    public init(now: @escaping @Sendable () -> Date = { Date() }) {
        self.now = now
    }

    /// Counts one fitted screen or reply.
    public func record(_ report: FitReport, platform: String, contract: String, appVersion: String) {
        add(
            Counts(requests: 1, rendered: report.rendered, fallbackHits: report.totalFallbacks, omissions: report.totalOmissions),
            platform, contract, appVersion)
    }

    /// Counts one request below the oldest supported contract version.
    public func recordUnsupported(platform: String, contract: String, appVersion: String) {
        add(Counts(unsupported: 1), platform, contract, appVersion)
    }

    private func add(_ counts: Counts, _ platform: String, _ contract: String, _ appVersion: String) {
        let bucket = Bucket(day: Self.day(of: now()), platform: platform, contract: Int(contract) ?? 0, appVersion: appVersion)
        pending.withLock { $0[bucket, default: Counts()] += counts }
    }

    static func day(of date: Date) -> Int { Int((date.timeIntervalSince1970 / 86_400).rounded(.down)) }

    /// How many flushes have written something.
    public var flushes: Int { written.load(ordering: .relaxed) }

    /// What has been counted and not yet written.
    public var unflushed: [Bucket: Counts] { pending.withLock { $0 } }

    /// Adds everything counted since the last flush to `contract_health_daily`, in one
    /// statement; returns the number of buckets written. On failure the counts are kept for
    /// the next flush and the error is rethrown.
    @discardableResult
    public func flush(to pool: PostgresPool) async throws -> Int {
        let batch = pending.withLock { pending in
            defer { pending = [:] }
            return pending
        }
        guard !batch.isEmpty else { return 0 }
        do {
            try await pool.withConnection { db in try await Self.write(batch, db) }
            written.add(1, ordering: .relaxed)
            return batch.count
        } catch {
            pending.withLock { pending in
                for (bucket, counts) in batch { pending[bucket, default: Counts()] += counts }
            }
            throw error
        }
    }

    /// One upsert for the whole batch, rows in key order so that replicas flushing at the
    /// same moment lock rows in the same order and cannot deadlock.
    static func write(_ batch: [Bucket: Counts], _ db: PostgresConnection) async throws {
        let rows: [JSONValue] = batch.sorted { $0.key < $1.key }.map { bucket, counts in
            [
                "day": .int(bucket.day), "platform": .string(bucket.platform), "contract": .int(bucket.contract),
                "app_version": .string(bucket.appVersion), "requests": .int(counts.requests),
                "components_rendered": .int(counts.rendered), "fallback_hits": .int(counts.fallbackHits),
                "omissions": .int(counts.omissions), "unsupported": .int(counts.unsupported),
            ]
        }
        try await db.query(
            """
            INSERT INTO contract_health_daily AS t
                (day, platform, contract, app_version, requests, components_rendered, fallback_hits, omissions, unsupported)
            SELECT DATE '1970-01-01' + r.day, r.platform, r.contract, r.app_version, r.requests, r.components_rendered,
                   r.fallback_hits, r.omissions, r.unsupported
            FROM jsonb_to_recordset($1::jsonb) AS r(day integer, platform text, contract integer, app_version text, requests bigint,
                 components_rendered bigint, fallback_hits bigint, omissions bigint, unsupported bigint)
            ON CONFLICT (day, platform, contract, app_version) DO UPDATE SET
                requests = t.requests + excluded.requests,
                components_rendered = t.components_rendered + excluded.components_rendered,
                fallback_hits = t.fallback_hits + excluded.fallback_hits,
                omissions = t.omissions + excluded.omissions,
                unsupported = t.unsupported + excluded.unsupported
            """, [PostgresJSON(String(decoding: JSONEncoding.encode(.array(rows)), as: UTF8.self))])
    }
}
