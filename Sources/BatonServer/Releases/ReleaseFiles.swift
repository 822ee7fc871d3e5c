import BatonJSON
import BatonFlows
import BatonRuntime
import Crypto
import Foundation

/// The files of a flows bundle, as a release stores them: the flows and `contract.yaml`,
/// `deeplinks.yaml` (and `services.yaml` when present) at the top, screen templates under
/// `screens/`. Scenario tests and the schema are not part of what is served.
public struct ReleaseFiles: Sendable, Equatable {
    /// Relative path → content.
    public var files: [String: String]

    public init(files: [String: String]) {
        self.files = files
    }

    /// The release's address: SHA-256 of every path and content, in path order, as hex.
    public var id: String {
        var hash = SHA256()
        for path in files.keys.sorted() {
            hash.update(data: Array(path.utf8) + [0])
            hash.update(data: Array(files[path]!.utf8) + [0])
        }
        return Hex.encode(bytesOf: hash.finalize())
    }

    /// Reads a flows directory.
    public static func read(directory: URL) throws -> ReleaseFiles {
        var files: [String: String] = [:]
        let fm = FileManager.default
        for (folder, prefix) in [(directory, ""), (directory.appendingPathComponent("screens"), "screens/")] {
            let entries = (try? fm.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)) ?? []
            for file in entries where ["yaml", "yml"].contains(file.pathExtension) {
                files[prefix + file.lastPathComponent] = try String(contentsOf: file, encoding: .utf8)
            }
        }
        guard !files.isEmpty else { throw ReleaseError("\(directory.path) holds no flow files") }
        return ReleaseFiles(files: files)
    }

    /// Writes the files under a fresh temporary `Flows/` directory, so a release loads through
    /// exactly the code that loads files from disk (same checks, same diagnostics).
    public func materialize() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("baton-release-\(id.prefix(16))-\(UUID().uuidString.prefix(8))")
        let directory = root.appendingPathComponent("Flows")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("screens"), withIntermediateDirectories: true)
        for (path, content) in files {
            guard !path.contains(".."), !path.hasPrefix("/"), path.split(separator: "/").count <= 2 else {
                throw ReleaseError("release file '\(path)' has an unexpected path")
            }
            try content.write(to: directory.appendingPathComponent(path), atomically: false, encoding: .utf8)
        }
        return directory
    }

    /// What changes from `old` to `self`, flow by flow and screen by screen.
    public func diff(from old: ReleaseFiles) -> [ReleaseChange] {
        var changes: [ReleaseChange] = []
        for path in Set(files.keys).union(old.files.keys).sorted() {
            switch (old.files[path], files[path]) {
            case (nil, let new?): changes.append(ReleaseChange(path: path, kind: .added, lines: ReleaseChange.lineDiff([], lines(new))))
            case (let before?, nil): changes.append(ReleaseChange(path: path, kind: .removed, lines: ReleaseChange.lineDiff(lines(before), [])))
            case (let before?, let after?) where before != after:
                changes.append(ReleaseChange(path: path, kind: .changed, lines: ReleaseChange.lineDiff(lines(before), lines(after))))
            default: break
            }
        }
        return changes
    }

    private func lines(_ text: String) -> [String] { text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) }
}

/// One file's change between two releases.
public struct ReleaseChange: Sendable, Equatable {
    public enum Kind: String, Sendable { case added, removed, changed }
    public var path: String
    public var kind: Kind
    /// `+ line`, `- line` (unchanged lines left out).
    public var lines: [String]

    /// A line diff (the standard library's `difference(from:)`): removed lines, then added ones.
    static func lineDiff(_ old: [String], _ new: [String]) -> [String] {
        var removed: [String] = []
        var added: [String] = []
        for change in new.difference(from: old) {
            switch change {
            case .remove(_, let line, _): removed.append("- " + line)
            case .insert(_, let line, _): added.append("+ " + line)
            }
        }
        return removed + added
    }
}

/// A release that cannot be published, found or loaded, in words for the operator.
public struct ReleaseError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
