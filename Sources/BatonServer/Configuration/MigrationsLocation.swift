import Foundation

/// Where the SQL migrations are when neither `--migrations-dir`, `BATON_MIGRATIONS_DIR` nor the
/// config file says: so an installed `baton` run from any directory still finds the ones it
/// was built with.
public enum MigrationsLocation {
    /// The places looked at, in order: `Migrations/` in the working directory (a checkout, or
    /// the Docker image's work directory); beside the executable (`<bin>/Migrations`); the
    /// install prefix (`<bin>/../share/baton/Migrations`); and the package the binary was built
    /// from (`swift run` anywhere).
    public static func candidates(
        workingDirectory: URL = URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
        executable: URL? = Bundle.main.executableURL,
        package: URL = packageRoot
    ) -> [URL] {
        var found = [workingDirectory.appendingPathComponent("Migrations")]
        // Both the path as invoked and its target: a symlinked `<prefix>/bin/baton` may point
        // into a versioned install directory that carries its own `share/`.
        for binary in [executable, executable?.resolvingSymlinksInPath()].compactMap({ $0 }) {
            let bin = binary.deletingLastPathComponent()
            found.append(bin.appendingPathComponent("Migrations"))
            found.append(bin.deletingLastPathComponent().appendingPathComponent("share/baton/Migrations"))
        }
        found.append(package.appendingPathComponent("Migrations"))
        return found.map(\.standardizedFileURL)
    }

    /// The first candidate that is a directory; `Migrations` (relative, as before) when none is,
    /// so the error names the conventional place.
    public static func find(in candidates: [URL] = candidates()) -> String {
        let fm = FileManager.default
        for candidate in candidates {
            var isDirectory: ObjCBool = false
            if fm.fileExists(atPath: candidate.path, isDirectory: &isDirectory), isDirectory.boolValue { return candidate.path }
        }
        return "Migrations"
    }

    /// The package root this file was compiled in (`Sources/BatonServer/Configuration/` up three).
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}
