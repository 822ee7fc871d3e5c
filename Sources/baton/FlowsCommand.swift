import ArgumentParser
import BatonBuiltinFlows
import BatonContract
import BatonServer
import BatonFlows
import BatonRuntime
import Foundation

/// The effects, guards and loaders this build of Baton provides.
func applicationRegistry() -> FlowRegistry {
    var registry = FlowRegistry()
    BuiltinFlows.register(into: &registry)
    return registry
}

/// Loads and lints a flows directory the way `serve` does: flows, screens, the contract, the
/// deep-link allowlist.
func loadDefinitions(_ directory: String) -> FlowDefinitions {
    FlowDefinitions.load(directory: URL(fileURLWithPath: directory).standardizedFileURL, catalog: applicationRegistry().catalog)
}

struct FlowsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flows",
        abstract: "Work with flow definitions: lint them, draw them, test them, publish them as live releases.",
        subcommands: [
            LintCommand.self, GraphCommand.self, TestCommand.self, CatalogCommand.self, PublishCommand.self, ReleasesCommand.self,
            DiffCommand.self, RollbackCommand.self, PromoteCommand.self,
        ]
    )

    struct LintCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "lint",
            abstract: "Check every flow and screen; print file:line:col: error|warning: message. Exit 1 on errors."
        )

        @OptionGroup var flows: FlowsDirectoryOption

        @Argument(help: .hidden)
        var directory: String?

        @Flag(help: "Treat warnings as errors.")
        var strict = false

        func run() async throws {
            let definitions = loadDefinitions(flows.directory(positional: directory, usage: "baton flows lint DIR"))
            let bundle = definitions.bundle
            for diagnostic in definitions.diagnostics { print(diagnostic) }
            let errors = definitions.diagnostics.filter { $0.severity == .error }.count
            let warnings = definitions.diagnostics.count - errors
            let summary = "\(bundle.flows.count) flow(s), \(bundle.screens.count) screen(s): \(errors) error(s), \(warnings) warning(s)"
            FileHandle.standardError.write(Data((summary + "\n").utf8))
            if errors > 0 || (strict && warnings > 0) { throw ExitCode(1) }
        }
    }

    struct GraphCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "graph",
            abstract: "Draw a flow's states and transitions (Mermaid or Graphviz DOT)."
        )

        @Argument(help: "The flow's name.")
        var flow: String

        @Option(help: "mermaid or dot.")
        var format: String = "mermaid"

        @OptionGroup var flows: FlowsDirectoryOption

        func run() async throws {
            guard let format = FlowGraph.Format(rawValue: format) else { fail("--format must be mermaid or dot") }
            let flowsDir = flows.directory()
            let bundle = loadDefinitions(flowsDir).bundle
            guard let definition = bundle.flows[flow] else {
                let known = bundle.flows.keys.sorted().joined(separator: ", ")
                fail("no flow '\(flow)' in \(flowsDir) (flows: \(known.isEmpty ? "none" : known))")
            }
            print(FlowGraph.render(definition, format: format), terminator: "")
        }
    }

    struct CatalogCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "catalog",
            abstract: "List the effects, guards and loaders flows can call: arguments, outcomes and result fields.",
            discussion: "docs/catalog.md is this command's --markdown output; a test fails when it falls behind."
        )

        @OptionGroup var flows: FlowsDirectoryOption

        @Flag(help: "Markdown, as in docs/catalog.md, instead of plain text.")
        var markdown = false

        func run() async throws {
            // Effects, guards and loaders are registered in Swift; services are declared in the
            // flows directory's services.yaml.
            var entries = applicationRegistry().catalog.entries
            let servicesFile = URL(fileURLWithPath: flows.directory()).appendingPathComponent(ServiceDefinitions.fileName)
            if let source = try? String(contentsOf: servicesFile, encoding: .utf8) {
                let (services, diagnostics) = ServiceDefinitions.load(source: source, file: servicesFile.path)
                for diagnostic in diagnostics { FileHandle.standardError.write(Data((diagnostic.description + "\n").utf8)) }
                entries += CatalogEntry.services(services)
            }
            print(markdown ? CatalogDocument.markdown(entries) : CatalogDocument.text(entries), terminator: "")
        }
    }
}
