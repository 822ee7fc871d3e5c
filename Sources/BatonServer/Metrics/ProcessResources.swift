#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// What the process uses of the machine, read when `/metrics` is scraped: the series of the
/// Prometheus client libraries' standard process collector (`process_cpu_seconds_total`,
/// `process_resident_memory_bytes`, `process_open_fds`, `process_max_fds`…), which dashboards
/// and alerts written for any service expect. swift-prometheus has no such collector; this reads
/// `getrusage`, `getrlimit` and, on Linux, `/proc/self`.
public struct ProcessResources: Sendable {
    /// User and system CPU time so far.
    public var cpuSeconds: Double
    /// Resident and virtual memory; nil where not read (not Linux).
    public var residentBytes: Double?
    public var virtualBytes: Double?
    /// Open file descriptors (sockets included); nil when they could not be listed.
    public var openFileDescriptors: Int?
    /// The soft limit on open file descriptors; nil when unlimited.
    public var maxFileDescriptors: Int?
    /// When the process started, in seconds since the Unix epoch.
    public var startTime: Double

    /// The process's resources now.
    public static func current() -> ProcessResources {
        var usage = rusage()
        getrusage(usageOfSelf, &usage)
        let cpu = seconds(usage.ru_utime) + seconds(usage.ru_stime)
        var resident: Double?
        var virtual: Double?
        #if os(Linux)
        // statm: total and resident size, in pages.
        if let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) {
            let pages = statm.split(separator: " ").prefix(2).compactMap { Double($0) }
            if pages.count == 2 {
                let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
                (virtual, resident) = (pages[0] * pageSize, pages[1] * pageSize)
            }
        }
        #endif
        let limit = fileDescriptorLimit()
        return ProcessResources(
            cpuSeconds: cpu, residentBytes: resident, virtualBytes: virtual, openFileDescriptors: openFileDescriptorCount(),
            maxFileDescriptors: limit.rlim_cur == unlimited ? nil : Int(clamping: UInt64(limit.rlim_cur)), startTime: startTime)
    }

    private static func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }

    /// Entries of the process's descriptor directory, less the one the listing itself opens.
    private static func openFileDescriptorCount() -> Int? {
        #if os(Linux)
        let directory = "/proc/self/fd"
        #else
        let directory = "/dev/fd"
        #endif
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return nil }
        return max(0, entries.count - 1)
    }

    /// The process's start: on Linux from `/proc/self/stat` (clock ticks after boot) and the boot
    /// time in `/proc/stat`; elsewhere, when this was first read (``BatonMetrics`` reads it as
    /// it is made, at start).
    static let startTime: Double = {
        let now = Date().timeIntervalSince1970
        #if os(Linux)
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let fields = stat.split(separator: ")").last?.split(separator: " "),
            // After the command's closing parenthesis, field 3 (state) comes first: starttime,
            // field 22, is the 20th.
            fields.count > 19, let ticks = Double(fields[19]),
            let system = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = system.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let boot = Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        else { return now }
        return boot + ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
        #else
        return now
        #endif
    }()

    // MARK: - The open-file limit

    private static func fileDescriptorLimit() -> rlimit {
        var limit = rlimit()
        getrlimit(resourceNoFile, &limit)
        return limit
    }

    /// The soft and hard limits on open file descriptors now.
    public static var descriptorLimits: (soft: UInt64, hard: UInt64) {
        let limit = fileDescriptorLimit()
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    #if os(Linux)
    private static let usageOfSelf = __rusage_who_t(RUSAGE_SELF.rawValue)
    /// `RLIM_INFINITY`, which Glibc's header spells in a way Swift does not import.
    private static let unlimited = rlim_t.max
    private static let resourceNoFile = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    /// Above this the kernel refuses (`fs.nr_open`'s default) even when the hard limit is unlimited.
    static let descriptorCeiling: UInt64 = 1 << 20
    #else
    private static let usageOfSelf = RUSAGE_SELF
    private static let unlimited = RLIM_INFINITY
    private static let resourceNoFile = RLIMIT_NOFILE
    /// macOS refuses a soft limit over `OPEN_MAX`.
    static let descriptorCeiling: UInt64 = UInt64(OPEN_MAX)
    #endif

    /// The soft limit to raise to, from the current soft and hard limits: the hard limit, capped
    /// at what the kernel takes; nil when the soft limit is there already (never lowered).
    public static func raisedDescriptorLimit(soft: UInt64, hard: UInt64) -> UInt64? {
        let target = min(hard, descriptorCeiling)
        return soft < target ? target : nil
    }

    /// Raises the soft limit on open file descriptors toward the hard limit, as Go's runtime
    /// and the JVM do at start: each client connection and each database connection takes one,
    /// and the soft limit is often 1 024 (systemd's default) while the hard limit is far higher.
    /// Past the limit, new connections wait in the kernel's queue until one closes. Returns the
    /// limits before and after, or nil when nothing changed (already at the hard limit, or
    /// refused).
    public static func raiseFileDescriptorLimit() -> (from: UInt64, to: UInt64)? {
        var limit = fileDescriptorLimit()
        let soft = UInt64(limit.rlim_cur)
        guard let target = raisedDescriptorLimit(soft: soft, hard: UInt64(limit.rlim_max)) else { return nil }
        limit.rlim_cur = rlim_t(target)
        guard setrlimit(resourceNoFile, &limit) == 0 else { return nil }
        // What the kernel made of it (macOS may hold it under kern.maxfilesperproc).
        let now = descriptorLimits.soft
        return now > soft ? (soft, now) : nil
    }
}
