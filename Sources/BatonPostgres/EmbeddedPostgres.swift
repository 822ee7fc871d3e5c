import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A private PostgreSQL cluster in a directory of its own, for development and tests.
///
/// `start()` runs `initdb` once (a `trust`-authenticated cluster listening only on a unix
/// socket inside the directory, which with its directory is the cluster account's alone, so
/// nothing else on the machine can reach it), starts it with `pg_ctl` unless it is already
/// running, creates the database, and returns a libpq conninfo.
/// `stop()` stops it again when no other process uses it (``usersFile``). PostgreSQL refuses
/// to run as root, so when Baton runs as root the cluster runs as the `postgres` system user.
public final class EmbeddedPostgres: Sendable {
    /// Where the cluster lives and how it runs.
    public struct Configuration: Sendable {
        /// The directory holding `data/`, the socket and the server log (`.baton/postgres`).
        public var directory: URL
        /// The database `start()` creates and connects to.
        public var databaseName: String
        /// Extra `postgres -c` settings (tests turn durability off for speed).
        public var settings: [String: String]
        /// Where `initdb` and `pg_ctl` live; found automatically when nil.
        public var binDirectory: String?
        /// The port: the socket's name, and the TCP port when ``tcpLoopback`` is set.
        public var port: Int
        /// Also listen on 127.0.0.1 (fault tests put a proxy in front of it); off by default, so
        /// nothing else on the machine can reach the cluster.
        public var tcpLoopback: Bool

        public init(
            directory: URL, databaseName: String = "baton", settings: [String: String] = [:], binDirectory: String? = nil,
            port: Int = 5432, tcpLoopback: Bool = false
        ) {
            self.directory = directory
            self.databaseName = databaseName
            self.settings = settings
            self.binDirectory = binDirectory
            self.port = port
            self.tcpLoopback = tcpLoopback
        }
    }

    /// Why the cluster could not be set up, with what to do about it.
    public struct Error: Swift.Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    public let configuration: Configuration
    /// While this instance uses the cluster (from `start` to `stop`): a descriptor of the users
    /// file holding a shared lock, released by the kernel however the process ends.
    private let use = Mutex<Int32?>(nil)

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    var dataDirectory: URL { configuration.directory.appendingPathComponent("data") }
    var logFile: URL { configuration.directory.appendingPathComponent("server.log") }
    /// Every process using the cluster holds a shared lock on this file; the last to stop finds
    /// none but its own and stops the cluster.
    var usersFile: URL { configuration.directory.appendingPathComponent("users.lock") }
    /// Held while the cluster is set up, or stopped, so that neither meets the other halfway.
    var setupLock: URL { configuration.directory.appendingPathComponent("lock") }

    /// The socket directory: inside the cluster directory when the path is short enough for a
    /// unix socket (about 100 bytes), else a short per-directory path under /tmp.
    var socketDirectory: String {
        let inside = configuration.directory.appendingPathComponent("run").path
        if inside.utf8.count + "/.s.PGSQL.\(configuration.port)".utf8.count < 100 { return inside }
        let digest = configuration.directory.path.utf8.reduce(UInt64(14_695_981_039_346_656_037)) {
            ($0 ^ UInt64($1)) &* 1_099_511_628_211
        }
        return "/tmp/baton-\(String(digest, radix: 36))"
    }

    /// The libpq conninfo of the running cluster.
    public var conninfo: String { conninfo(database: configuration.databaseName) }

    /// The conninfo of one of the cluster's databases (the socket's path quoted: it may hold
    /// spaces or quotes).
    func conninfo(database: String) -> String {
        "host=\(Conninfo.quoted(socketDirectory)) port=\(configuration.port) user=postgres dbname=\(Conninfo.quoted(database))"
    }

    /// Creates the cluster if needed, starts it if it is not running, and ensures the database
    /// exists. Returns the conninfo. Safe to call from two processes at once (a file lock).
    @discardableResult
    public func start(log: (String) -> Void = { _ in }) throws -> String {
        guard Self.isValidIdentifier(configuration.databaseName) else {
            throw Error(description: "database name '\(configuration.databaseName)' must be lowercase letters, digits and _")
        }
        let binaries = try Self.findBinaries(configuration.binDirectory)
        let runAs = try Self.serviceUser()
        let fm = FileManager.default
        try fm.createDirectory(at: configuration.directory, withIntermediateDirectories: true)
        try fm.createDirectory(atPath: socketDirectory, withIntermediateDirectories: true)
        if let runAs {
            try Self.checkTraversable(configuration.directory, by: runAs)
            for path in [configuration.directory.path, socketDirectory] { chown(path, runAs.uid, runAs.gid) }
        }
        try Self.keepPrivate(socketDirectory, owner: runAs?.uid ?? geteuid())
        return try withFileLock(setupLock.path) {
            if !fm.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path) {
                log("initialising a PostgreSQL cluster in \(dataDirectory.path)")
                try? fm.removeItem(at: dataDirectory)
                try run(
                    binaries.initdb,
                    ["-D", dataDirectory.path, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync"],
                    as: runAs, what: "initdb")
            }
            if try !isRunning(binaries) {
                log("starting PostgreSQL (socket in \(socketDirectory), log in \(logFile.path))")
                // pg_ctl runs these through /bin/sh: each value is quoted for it (a checkout path
                // with a space, or a quote, would otherwise split or run as shell).
                // The cluster trusts whoever reaches its socket: only its own account may (the
                // server's default is 0777).
                var options = [
                    "-k \(shellQuoted(socketDirectory))", configuration.tcpLoopback ? "-c listen_addresses=127.0.0.1" : "-c listen_addresses=''",
                    "-p \(configuration.port)", "-c unix_socket_permissions=0700",
                ]
                for (key, value) in configuration.settings.sorted(by: { $0.key < $1.key }) {
                    options.append("-c \(shellQuoted("\(key)=\(value)"))")
                }
                try run(
                    binaries.pgctl,
                    ["-D", dataDirectory.path, "-l", logFile.path, "-w", "-t", "60", "-o", options.joined(separator: " "), "start"],
                    as: runAs, what: "pg_ctl start")
            } else {
                log("using the PostgreSQL cluster already running in \(dataDirectory.path) (it stops when its last user stops)")
            }
            try createDatabaseIfMissing()
            try holdUse()
            return conninfo
        }
    }

    /// Counts this instance among the cluster's users (once): a shared lock on ``usersFile``.
    /// Called under the set-up lock, so that no user stops the cluster meanwhile.
    private func holdUse() throws {
        try use.withLock { held in
            guard held == nil else { return }
            let descriptor = open(usersFile.path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
            guard descriptor >= 0, flock(descriptor, LOCK_SH) == 0 else {
                if descriptor >= 0 { close(descriptor) }
                throw Error(description: "cannot lock \(usersFile.path) (errno \(errno))")
            }
            held = descriptor
        }
    }

    /// Stops using the cluster, and stops the cluster (`pg_ctl stop -m fast`) if no other
    /// process uses it, whichever process started it. Before, the process that started the
    /// cluster stopped it when it ended, so a CLI command (`baton flows publish`) that started it
    /// took the database from a `baton serve` that had joined it meanwhile. A user that died
    /// without stopping (killed) holds no lock: the kernel released it.
    public func stop() throws {
        guard let descriptor = use.withLock({ held in defer { held = nil }; return held }) else { return }
        var held = true
        defer { if held { close(descriptor) } }
        try withFileLock(setupLock.path) {
            // Released before the set-up lock is, so that a process starting next finds no user.
            defer {
                close(descriptor)
                held = false
            }
            // The shared lock becomes exclusive only if no one else holds one. A cluster already
            // down (crashed, stopped by hand) is no error to its last user.
            guard flock(descriptor, LOCK_EX | LOCK_NB) == 0, try isRunning(try Self.findBinaries(configuration.binDirectory)) else { return }
            try stopCluster()
        }
    }

    /// Stops the cluster whoever uses it (every other user loses its database): for tests and
    /// `baton flows test`, whose clusters are their own. This instance stops using it too.
    public func forceStop() throws {
        if let descriptor = use.withLock({ held in defer { held = nil }; return held }) { close(descriptor) }
        try withFileLock(setupLock.path) { try stopCluster() }
    }

    private func stopCluster() throws {
        let binaries = try Self.findBinaries(configuration.binDirectory)
        try run(binaries.pgctl, ["-D", dataDirectory.path, "-m", "fast", "-w", "-t", "60", "stop"], as: try Self.serviceUser(), what: "pg_ctl stop")
    }

    /// Starts a small watchdog process that stops the cluster (immediately) once the current
    /// process has gone, however it ended — a crashed or killed test run must not leave a
    /// postmaster behind. With `removeDirectory`, the watchdog also deletes the cluster's files.
    public func stopWhenThisProcessExits(removeDirectory: Bool) throws {
        let binaries = try Self.findBinaries(configuration.binDirectory)
        let prefix = (try Self.serviceUser()?.switchCommand ?? []).map(shellQuoted).joined(separator: " ")
        var script = "while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done; "
        script += "\(prefix) \(shellQuoted(binaries.pgctl)) -D \(shellQuoted(dataDirectory.path)) -m immediate -w stop >/dev/null 2>&1; "
        if removeDirectory { script += "rm -rf \(shellQuoted(configuration.directory.path)) \(shellQuoted(socketDirectory))" }
        try spawnDetached(["/bin/sh", "-c", script])
    }

    /// Creates another database in the same cluster (tests give each suite its own).
    public func createDatabase(_ name: String, template: String? = nil) throws -> String {
        guard Self.isValidIdentifier(name), template.map(Self.isValidIdentifier) ?? true else {
            throw Error(description: "database names must be lowercase letters, digits and _")
        }
        let admin = try PostgresConnection(conninfo: conninfo(database: "postgres"))
        // Identifiers cannot be parameters; the names were validated above.
        try admin.execute("CREATE DATABASE \(name)" + (template.map { " TEMPLATE \($0)" } ?? ""))
        return conninfo(database: name)
    }

    // MARK: - Internals

    private func createDatabaseIfMissing() throws {
        let admin = try PostgresConnection(conninfo: conninfo(database: "postgres"))
        let exists = try admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [configuration.databaseName])
        if exists.isEmpty {
            do {
                try admin.execute("CREATE DATABASE \(configuration.databaseName)")
            } catch let error as PostgresError where error.sqlState == "42P04" {
                // Created concurrently by another process: fine.
            }
        }
    }

    private func isRunning(_ binaries: Binaries) throws -> Bool {
        // pg_ctl status: 0 running, 3 not running, 4 no data directory.
        let status = try runStatus(binaries.pgctl, ["-D", dataDirectory.path, "status"], as: try Self.serviceUser())
        return status.code == 0
    }

    private func run(_ executable: String, _ arguments: [String], as user: ServiceUser?, what: String) throws {
        let status = try runStatus(executable, arguments, as: user)
        guard status.code == 0 else {
            var message = "\(what) failed (exit \(status.code)): \(status.output.trimmingCharacters(in: .whitespacesAndNewlines))"
            if let tail = try? String(contentsOf: logFile, encoding: .utf8).split(separator: "\n").suffix(5), !tail.isEmpty {
                message += "\nlast lines of \(logFile.path):\n" + tail.joined(separator: "\n")
            }
            throw Error(description: message)
        }
    }

    private func runStatus(_ executable: String, _ arguments: [String], as user: ServiceUser?) throws -> (code: Int32, output: String) {
        let command = (user?.switchCommand ?? []) + [executable] + arguments
        return try runProcess(command)
    }

    struct Binaries {
        var initdb: String
        var pgctl: String
    }

    /// Looks for `initdb`/`pg_ctl`: `BATON_PG_BIN`, the configured directory, `pg_config
    /// --bindir`, Debian's `/usr/lib/postgresql/<newest>/bin`, Homebrew, then `PATH`.
    static func findBinaries(_ configured: String?) throws -> Binaries {
        var candidates: [String] = []
        if let env = ProcessInfo.processInfo.environment["BATON_PG_BIN"] { candidates.append(env) }
        if let configured { candidates.append(configured) }
        if let bindir = try? shell("pg_config", ["--bindir"]) { candidates.append(bindir) }
        let fm = FileManager.default
        if let versions = try? fm.contentsOfDirectory(atPath: "/usr/lib/postgresql") {
            for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
                candidates.append("/usr/lib/postgresql/\(version)/bin")
            }
        }
        for prefix in ["/opt/homebrew/opt", "/usr/local/opt"] {
            if let formulas = try? fm.contentsOfDirectory(atPath: prefix) {
                for formula in formulas.sorted(by: >) where formula.hasPrefix("postgresql") {
                    candidates.append("\(prefix)/\(formula)/bin")
                }
            }
        }
        candidates += (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        for directory in candidates
        where fm.isExecutableFile(atPath: directory + "/initdb") && fm.isExecutableFile(atPath: directory + "/pg_ctl") {
            return Binaries(initdb: directory + "/initdb", pgctl: directory + "/pg_ctl")
        }
        throw Error(
            description: """
                PostgreSQL server binaries (initdb, pg_ctl) not found. Install them (Debian/Ubuntu: \
                apt-get install postgresql; macOS: brew install postgresql@16), set BATON_PG_BIN to their \
                directory, or set DATABASE_URL to use an existing server.
                """)
    }

    private static func shell(_ command: String, _ arguments: [String]) throws -> String {
        let result = try runProcess([command] + arguments)
        guard result.code == 0 else { throw Error(description: "\(command) failed") }
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The account the cluster's programs run as (files they must read are its).
    package struct ServiceUser {
        package var uid: uid_t
        package var gid: gid_t
        var switchCommand: [String]
    }

    /// nil when running as a normal user; the `postgres` account when running as root.
    package static func serviceUser() throws -> ServiceUser? {
        guard geteuid() == 0 else { return nil }
        guard let entry = getpwnam("postgres") else {
            throw Error(
                description: "running as root, PostgreSQL needs an unprivileged account: create the 'postgres' user (apt-get install postgresql does) or run Baton as a normal user")
        }
        let fm = FileManager.default
        let command: [String]
        if fm.isExecutableFile(atPath: "/usr/sbin/runuser") || fm.isExecutableFile(atPath: "/sbin/runuser") {
            command = [fm.isExecutableFile(atPath: "/usr/sbin/runuser") ? "/usr/sbin/runuser" : "/sbin/runuser", "-u", "postgres", "--"]
        } else {
            command = ["/usr/bin/sudo", "-u", "postgres", "--"]
        }
        return ServiceUser(uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid, switchCommand: command)
    }

    /// The postgres account must be able to reach the cluster directory: every parent needs the
    /// search (x) bit for others, which /root for example does not have.
    static func checkTraversable(_ directory: URL, by user: ServiceUser) throws {
        var path = directory.deletingLastPathComponent().path
        while !path.isEmpty, path != "/" {
            var info = stat()
            if stat(path, &info) == 0, info.st_uid != user.uid, info.st_mode & 0o001 == 0 {
                throw Error(
                    description: """
                        the postgres account cannot reach \(directory.path) because \(path) is not searchable by others; \
                        move the project, run as a normal user, or set DATABASE_URL
                        """)
            }
            path = (path as NSString).deletingLastPathComponent
        }
    }

    /// The socket directory is the cluster's account's alone (0700): the cluster trusts any local
    /// connection, so any user who could reach the socket would be its superuser. A directory
    /// that another account owns (a /tmp path made beforehand by someone else) is refused.
    static func keepPrivate(_ path: String, owner: uid_t) throws {
        chmod(path, 0o700)
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == owner, info.st_mode & 0o077 == 0 else {
            throw Error(
                description: "the socket directory \(path) must be a directory of the cluster's account alone (0700); remove it or set DATABASE_URL")
        }
    }

    static func isValidIdentifier(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 63 && name.first!.isLetter
            && name.allSatisfy { ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "_" }
    }
}

/// Runs a command to completion and returns its exit status and combined output.
///
/// Foundation's `Process` is not used on purpose: on Linux it notices a child's exit through a
/// descriptor that the postmaster `pg_ctl start` leaves behind inherits, so waiting never ends.
/// posix_spawn + waitpid on the child's pid has no such coupling, and output goes to a file
/// rather than a pipe for the same reason.
func runProcess(_ command: [String]) throws -> (code: Int32, output: String) {
    let outputPath = NSTemporaryDirectory() + "baton-cmd-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).out"
    defer { unlink(outputPath) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    // Nothing but stdin/stdout/stderr reaches the child: a postmaster started by pg_ctl lives
    // on, and any pipe it inherited (a test runner's, say) would never see end-of-file.
    #if canImport(Darwin)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_CLOEXEC_DEFAULT))
    #else
    closeInheritedDescriptors(&actions)
    #endif
    var pid: pid_t = 0
    let argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    let status = posix_spawnp(&pid, command[0], &actions, &attributes, argv, environ)
    guard status == 0 else {
        throw EmbeddedPostgres.Error(description: "cannot run \(command[0]): \(String(cString: strerror(status)))")
    }
    var exitStatus: Int32 = 0
    while waitpid(pid, &exitStatus, 0) == -1 {
        guard errno == EINTR else { throw EmbeddedPostgres.Error(description: "waitpid failed for \(command[0])") }
    }
    let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    // WIFEXITED / WEXITSTATUS, spelled out (they are macros in C).
    let code: Int32 = (exitStatus & 0x7f) == 0 ? (exitStatus >> 8) & 0xff : 128 + (exitStatus & 0x7f)
    return (code, output)
}

#if !canImport(Darwin)
/// Adds "close every descriptor from 3 up" to `actions`: glibc's
/// `posix_spawn_file_actions_addclosefrom_np` (2.34+) when present — looked up at run time, as
/// Swift's Glibc module does not expose it — else one close action per open descriptor.
private func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
        _ = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, 3)
        return
    }
    let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    for descriptor in open.compactMap({ Int32($0) }) where descriptor > 2 {
        posix_spawn_file_actions_addclose(&actions, descriptor)
    }
}
#endif

/// Starts a command and does not wait for it (it is reaped by init once we are gone).
func spawnDetached(_ command: [String]) throws {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for descriptor: Int32 in 0...2 {
        posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
    }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    #if canImport(Darwin)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_CLOEXEC_DEFAULT | POSIX_SPAWN_SETSID))
    #else
    posix_spawnattr_setflags(&attributes, 0x80)  // POSIX_SPAWN_SETSID (a GNU extension Swift does not import)
    closeInheritedDescriptors(&actions)
    #endif
    let argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let status = posix_spawnp(&pid, command[0], &actions, &attributes, argv, environ)
    guard status == 0 else {
        throw EmbeddedPostgres.Error(description: "cannot start \(command[0]): \(String(cString: strerror(status)))")
    }
}

/// `text` quoted for /bin/sh.
func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// Serialises cluster set-up and stopping between processes sharing the directory.
func withFileLock<R>(_ path: String, _ body: () throws -> R) throws -> R {
    let descriptor = open(path, O_CREAT | O_RDWR, 0o644)
    guard descriptor >= 0 else { throw EmbeddedPostgres.Error(description: "cannot open lock file \(path)") }
    defer { close(descriptor) }
    flock(descriptor, LOCK_EX)
    defer { flock(descriptor, LOCK_UN) }
    return try body()
}
