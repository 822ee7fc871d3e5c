// The database client alone, without HTTP: tasks running the diagnostics probe's transaction
// (lock a row, update it, append to a log: two round trips) on a `PostgresPool`, as fast as
// they can, for a while. Prints transactions per second and this process's CPU and context
// switches per transaction and per round trip, to set beside the pgbench client's on the same
// statements (Benchmarks/e2e/db-client-vs-pgbench.sh runs both).
//
//   baton-db-client-bench --conninfo "host=/tmp/… dbname=baton user=postgres" --connections 8 --seconds 8 [--on-loop]
import BatonExecutor
import BatonPostgres
import Foundation
import NIOCore
import NIOPosix

// Tasks run on NIO's event loops, as in `baton serve` (Sources/baton/main.swift): a pool body
// hops from the caller's event loop to its connection's database loop and back.
_ = EventLoopGlobalExecutor.mode

struct Options {
    var conninfo = ""
    var connections = 8
    var tasks: Int?
    var seconds = 8.0
    var subjects = 1000
    /// Each task runs on a database loop (its preferred task executor) instead of NIO's event
    /// loops: the floor a caller already on the connection's thread would reach.
    var onLoop = false

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        while let name = rest.popFirst() {
            if name == "--on-loop" {
                onLoop = true
                continue
            }
            guard let value = rest.popFirst() else { throw Usage("\(name) needs a value") }
            switch name {
            case "--conninfo": conninfo = value
            case "--connections": connections = try Self.number(name, value)
            case "--tasks": tasks = try Self.number(name, value)
            case "--seconds": seconds = Double(try Self.number(name, value))
            case "--subjects": subjects = try Self.number(name, value)
            default: throw Usage("unknown option \(name)")
            }
        }
        guard !conninfo.isEmpty else { throw Usage("--conninfo is required") }
    }

    static func number(_ name: String, _ value: String) throws -> Int {
        guard let number = Int(value), number > 0 else { throw Usage("\(name) takes a positive whole number, not '\(value)'") }
        return number
    }
}

struct Usage: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// CPU seconds (user + system) and context switches (voluntary + involuntary) of this process.
func usage() -> (cpu: Double, switches: Int) {
    var usage = rusage()
    #if os(Linux)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    return (cpu, usage.ru_nvcsw + usage.ru_nivcsw)
}

/// The probe's transaction, as `DiagnosticsController` runs it: two round trips.
func probe(_ pool: PostgresPool, subject: String) async throws {
    try await pool.withTransaction { connection in
        let rows = try await connection.query("SELECT hits FROM probe_counters WHERE subject = $1 FOR UPDATE", [subject])
        guard let row = rows.first else { throw Usage("no probe counter '\(subject)': seed probe_counters first") }
        let hits = try row.decode(Int.self, at: 0) + 1
        connection.enqueue("UPDATE probe_counters SET hits = $2, updated_at = now() WHERE subject = $1", [subject, hits])
        connection.enqueue("INSERT INTO probe_log (subject, hits) VALUES ($1, $2)", [subject, hits])
    }
}

let options: Options
do { options = try Options(Array(CommandLine.arguments.dropFirst())) } catch {
    FileHandle.standardError.write(Data("baton-db-client-bench: \(error)\n".utf8))
    exit(2)
}
let pool = PostgresPool(configuration: .init(conninfo: options.conninfo, maxConnections: options.connections))
// Warm up: every connection opened and its statements prepared before the clock starts.
try await withThrowingTaskGroup(of: Void.self) { group in
    for task in 0..<options.connections {
        group.addTask { for round in 0..<20 { try await probe(pool, subject: String((task * 20 + round) % options.subjects + 1)) } }
    }
    try await group.waitForAll()
}
let end = ContinuousClock.now + .milliseconds(Int(options.seconds * 1000))
let before = usage()
let started = ContinuousClock.now
let transactions = try await withThrowingTaskGroup(of: Int.self) { group in
    for task in 0..<(options.tasks ?? options.connections) {
        group.addTask {
            func run() async throws -> Int {
                var done = 0
                while ContinuousClock.now < end {
                    try await probe(pool, subject: String(Int.random(in: 1...options.subjects)))
                    done += 1
                }
                return done
            }
            guard options.onLoop else { return try await run() }
            // Task i on loop i: with as many connections as loops, the pool's slot i is on loop i too.
            return try await withTaskExecutorPreference(PostgresEventLoop.shared[task % PostgresEventLoop.shared.count]) { try await run() }
        }
    }
    var total = 0
    for try await done in group { total += done }
    return total
}
let elapsed = ContinuousClock.now - started
let after = usage()
await pool.close()
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
let cpu = (after.cpu - before.cpu) * 1e6 / Double(transactions)
print(
    "transactions \(transactions) tps \(Int(Double(transactions) / seconds)) cpu_us_per_tx \(Int(cpu.rounded())) "
        + "cpu_us_per_round_trip \(Int((cpu / 2).rounded())) switches_per_tx "
        + String(format: "%.1f", Double(after.switches - before.switches) / Double(transactions)))
