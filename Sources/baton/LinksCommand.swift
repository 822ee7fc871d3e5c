import ArgumentParser
import BatonDeepLinks
import BatonServer
import Foundation

struct LinksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "links",
        abstract: "Check URLs against the deep-link allowlist (Flows/deeplinks.yaml).",
        subcommands: [CheckCommand.self]
    )

    struct CheckCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Explain whether a URL opens a flow or screen (and as an openUrl target), and which rule decides.",
            discussion: "Exit status 0 when the link is allowed as a deep link, 1 when it is rejected, 2 when the allowlist does not load."
        )

        @Argument(help: "The URL, quoted.")
        var url: String

        @Option(help: "The client platform: ios, android, web, appclip, widget, other.")
        var platform: String = "ios"

        @OptionGroup var flows: FlowsDirectoryOption

        func run() async throws {
            let flowsDir = flows.directory()
            let directory = URL(fileURLWithPath: flowsDir).standardizedFileURL
            let (allowlist, diagnostics) = DeepLinkAllowlist.load(directory: directory)
            diagnostics.forEach { print($0) }
            guard let allowlist else {
                // 2, not 1: a script tells a broken allowlist from a rejected link.
                FileHandle.standardError.write(Data("error: the allowlist in \(flowsDir)/deeplinks.yaml does not load\n".utf8))
                throw ExitCode(2)
            }
            let explanation = allowlist.explain(url, platform: platform)
            print(explanation)
            if !explanation.decision.isAllowed { throw ExitCode(1) }
        }
    }
}
