import BatonContract
import BatonFlows
import BatonPostgres
import Foundation

/// `baton report contract`: per app version, how much of what it was served arrived without a
/// fallback, and whether the current flows render fully for the contract version it speaks —
/// from the daily rollup, so it covers every replica and survives restarts.
public struct ContractHealthReport: Sendable, Equatable {
    /// One app version (platform, app major.minor, contract version) over the period.
    public struct Row: Sendable, Equatable {
        public var platform: String
        public var appVersion: String
        public var contract: Int
        public var requests: Int
        public var rendered: Int
        public var fallbackHits: Int
        public var omissions: Int
        public var unsupported: Int
        /// Whether the current flows and screens render without any fallback or omission for
        /// this contract version (with every capability); nil below the oldest supported version.
        public var rendersFully: Bool?

        /// One minus the fallback hit rate: fallback hits (each step of a chain, actions
        /// included) over components sent, as the dashboard's headline; nil with none sent.
        public var withoutFallback: Double? {
            rendered > 0 ? Double(max(rendered - fallbackHits, 0)) / Double(rendered) : nil
        }
    }

    public var days: Int
    public var firstDay: String
    public var lastDay: String
    public var rows: [Row]
    /// Per contract version served, what the current flows would not show as designed.
    public var shortfalls: [Int: [String]]

    /// Reads the last `days` days (today included, UTC) and checks the current definitions
    /// against each contract version found.
    public static func load(days: Int, pool: PostgresPool, bundle: FlowBundle, contract: ContractRegistry) async throws -> ContractHealthReport {
        let (first, last, rows) = try await pool.withConnection { db in
            let exists = try await db.query("SELECT to_regclass('contract_health_daily') IS NOT NULL")[0].decode(Bool.self, at: 0)
            guard exists else { throw ReportError(description: "the database has no contract_health_daily table yet: run `baton migrate`") }
            let bounds = try await db.query(
                "SELECT to_char(current_date - ($1::int - 1), 'YYYY-MM-DD'), to_char(current_date, 'YYYY-MM-DD')", [days])[0]
            let rows = try await db.query(
                """
                SELECT platform, app_version, contract, sum(requests)::bigint, sum(components_rendered)::bigint,
                       sum(fallback_hits)::bigint, sum(omissions)::bigint, sum(unsupported)::bigint
                FROM contract_health_daily
                WHERE day > current_date - $1::int
                GROUP BY platform, app_version, contract
                """, [days]
            ).map { row in
                Row(
                    platform: try row.decode(String.self, at: 0), appVersion: try row.decode(String.self, at: 1),
                    contract: try row.decode(Int.self, at: 2), requests: try row.decode(Int.self, at: 3),
                    rendered: try row.decode(Int.self, at: 4), fallbackHits: try row.decode(Int.self, at: 5),
                    omissions: try row.decode(Int.self, at: 6), unsupported: try row.decode(Int.self, at: 7))
            }
            return (try bounds.decode(String.self, at: 0), try bounds.decode(String.self, at: 1), rows)
        }
        return make(days: days, firstDay: first, lastDay: last, rows: rows, bundle: bundle, contract: contract)
    }

    /// Orders the rows and judges each contract version against the current definitions.
    static func make(days: Int, firstDay: String, lastDay: String, rows: [Row], bundle: FlowBundle, contract: ContractRegistry)
        -> ContractHealthReport
    {
        let linter = ContractLinter(registry: contract)
        var shortfalls: [Int: [String]] = [:]
        for version in Set(rows.map(\.contract)) where version >= contract.oldest {
            let served = contract.effectiveVersion(version) ?? version
            shortfalls[version] = linter.shortfalls(bundle, for: .init(contract: served, capabilities: contract.allCapabilities))
        }
        let judged = rows.map { row in
            var row = row
            row.rendersFully = shortfalls[row.contract].map(\.isEmpty)
            return row
        }.sorted { a, b in
            if a.platform != b.platform { return a.platform < b.platform }
            if a.appVersion != b.appVersion { return versionKey(b.appVersion).lexicographicallyPrecedes(versionKey(a.appVersion)) }
            return a.contract < b.contract
        }
        return ContractHealthReport(days: days, firstDay: firstDay, lastDay: lastDay, rows: judged, shortfalls: shortfalls)
    }

    /// Newest app versions first within a platform; `other` last.
    static func versionKey(_ version: String) -> [Int] {
        let parts = version.split(separator: ".").compactMap { Int($0) }
        return parts.isEmpty ? [-1] : parts
    }

    struct ReportError: Error, CustomStringConvertible {
        var description: String
    }

    // MARK: - Output

    static func percent(_ share: Double?) -> String {
        share.map { String(format: "%.1f%%", $0 * 100) } ?? "–"
    }

    static func verdict(_ row: Row) -> String {
        switch row.rendersFully {
        case true?: "render fully"
        case false?: "fall back"
        case nil: "update required"
        }
    }

    /// A table for a terminal, then what falls back for each contract version.
    public var text: String {
        var lines = ["Contract health, \(firstDay) – \(lastDay) (UTC, last \(days) day\(days == 1 ? "" : "s"))", ""]
        guard !rows.isEmpty else { return (lines + ["No traffic recorded in this period."]).joined(separator: "\n") + "\n" }
        let header = ["platform", "app", "contract", "requests", "components", "fallback hits", "omitted", "without fallback", "unsupported", "current flows"]
        let body = rows.map { row in
            [
                row.platform, row.appVersion, String(row.contract), String(row.requests), String(row.rendered), String(row.fallbackHits),
                String(row.omissions), Self.percent(row.withoutFallback), String(row.unsupported), Self.verdict(row),
            ]
        }
        let widths = header.indices.map { column in ([header] + body).map { $0[column].count }.max() ?? 0 }
        let numeric = Set(2...8)
        for cells in [header] + body {
            lines.append(
                cells.enumerated().map { column, cell in
                    let pad = String(repeating: " ", count: widths[column] - cell.count)
                    return numeric.contains(column) ? pad + cell : cell + pad
                }.joined(separator: "  ").trimmingCharacters(in: .whitespaces))
        }
        for (version, findings) in shortfalls.sorted(by: { $0.key < $1.key }) where !findings.isEmpty {
            lines.append("")
            lines.append("Contract \(version): the current flows fall back (with every capability) in")
            lines += findings.map { "  \($0)" }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The same rows as CSV (RFC 4180), shares as fractions.
    public var csv: String {
        var lines = ["platform,app_version,contract,requests,components_rendered,fallback_hits,omissions,unsupported,share_without_fallback,renders_fully"]
        for row in rows {
            let share = row.withoutFallback.map { String(format: "%.4f", $0) } ?? ""
            let fully = row.rendersFully.map { $0 ? "true" : "false" } ?? ""
            lines.append(
                [
                    Self.csvField(row.platform), Self.csvField(row.appVersion), String(row.contract), String(row.requests), String(row.rendered),
                    String(row.fallbackHits), String(row.omissions), String(row.unsupported), share, fully,
                ].joined(separator: ","))
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    static func csvField(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// A horizontal bar chart of the share served without fallback, one bar per app version.
    public var svg: String {
        let rowHeight = 26
        let labelWidth = 190
        let barWidth = 420
        let top = 48
        let height = top + max(rows.count, 1) * rowHeight + 24
        let width = labelWidth + barWidth + 90
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        }
        var parts = [
            #"<svg xmlns="http://www.w3.org/2000/svg" width="\#(width)" height="\#(height)" viewBox="0 0 \#(width) \#(height)" font-family="sans-serif" font-size="13">"#,
            #"<rect width="100%" height="100%" fill="white"/>"#,
            #"<text x="12" y="22" font-size="15" font-weight="bold">\#(escaped("Components served without fallback, \(firstDay) – \(lastDay)"))</text>"#,
        ]
        for (index, row) in rows.enumerated() {
            let y = top + index * rowHeight
            let share = row.withoutFallback ?? 0
            let color = row.rendersFully == nil ? "#9e9e9e" : share >= 0.99 ? "#2e7d32" : share >= 0.9 ? "#f9a825" : "#c62828"
            let label = escaped("\(row.platform) \(row.appVersion) · contract \(row.contract)")
            parts.append(#"<text x="12" y="\#(y + 16)">\#(label)</text>"#)
            parts.append(#"<rect x="\#(labelWidth)" y="\#(y + 4)" width="\#(barWidth)" height="16" fill="rgb(238,238,238)"/>"#)
            parts.append(#"<rect x="\#(labelWidth)" y="\#(y + 4)" width="\#(Int((share * Double(barWidth)).rounded()))" height="16" fill="\#(color)"/>"#)
            parts.append(#"<text x="\#(labelWidth + barWidth + 8)" y="\#(y + 16)">\#(escaped(Self.percent(row.withoutFallback)))</text>"#)
        }
        parts.append("</svg>")
        return parts.joined(separator: "\n") + "\n"
    }
}
