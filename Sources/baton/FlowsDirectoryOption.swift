import ArgumentParser
import Foundation

/// The flows directory, given the same way to every command that reads one:
/// `--flows-dir DIR`, else `BATON_FLOWS_DIR`, else `Flows` (as `serve` reads it). Commands that
/// read a configuration (`--config`) take it from there, as `serve` does: the flag, then the
/// variable, then the file's `baton.flows.dir`.
struct FlowsDirectoryOption: ParsableArguments {
    @Option(help: "The flows directory (BATON_FLOWS_DIR, default Flows).")
    var flowsDir: String?

    /// The directory to use. `positional` is the directory some commands used to take as an
    /// argument: still honoured when `--flows-dir` is absent, with a note that it is going away.
    /// `configured` is the configuration's `baton.flows.dir`, which already holds the variable
    /// and the default.
    func directory(positional: String? = nil, usage: String = "", configured: String? = nil) -> String {
        if let positional {
            let replacement = usage.replacingOccurrences(of: "DIR", with: "--flows-dir \(positional)")
            if flowsDir != nil {
                warn("'\(positional)' is ignored: --flows-dir wins (the positional flows directory is deprecated)")
            } else {
                warn("the flows directory as an argument is deprecated; write `\(replacement)`")
                return positional
            }
        }
        return flowsDir ?? configured ?? ProcessInfo.processInfo.environment["BATON_FLOWS_DIR"] ?? "Flows"
    }
}

/// Prints a warning on standard error, where it does not mix with a command's output.
func warn(_ message: String) {
    FileHandle.standardError.write(Data("warning: \(message)\n".utf8))
}
