import Foundation

/// Everything under `Flows/` that the engine needs: flows and screen templates, loaded and
/// linted together so cross-file references (a flow's screen template) are checked.
public struct FlowBundle: Sendable {
    public var flows: [String: FlowDefinition]
    public var screens: [String: ScreenTemplate]
    public var diagnostics: [Diagnostic]
    public var directory: URL
    /// The backend services flows may call (`services.yaml`).
    public var services: [String: ServiceDefinition] = [:]

    /// Loads `directory`: every `*.yaml` at the top level except the reserved files
    /// (`contract.yaml`, `deeplinks.yaml`, `services.yaml`) is a flow; `screens/*.yaml` are screen templates.
    /// Paths in diagnostics are relative to the directory's parent (so `Flows/x.yaml:3:5`).
    public static func load(directory: URL, catalog: FlowCatalog, extraChecks: [FlowBundleCheck] = []) -> FlowBundle {
        var diagnostics: [Diagnostic] = []
        var flows: [String: FlowDefinition] = [:]
        var screens: [String: ScreenTemplate] = [:]
        let fm = FileManager.default
        let base = directory.deletingLastPathComponent().path
        func display(_ url: URL) -> String {
            let path = url.standardizedFileURL.path
            return path.hasPrefix(base + "/") ? String(path.dropFirst(base.count + 1)) : path
        }
        let reserved: Set<String> = ["contract.yaml", "deeplinks.yaml", ServiceDefinitions.fileName]
        let entries = (try? fm.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
        var isDirectory: ObjCBool = false
        if entries.isEmpty, !fm.fileExists(atPath: directory.path, isDirectory: &isDirectory) {
            diagnostics.append(.error("flows directory does not exist", at: SourceLocation(file: directory.path, line: 1, column: 1)))
        } else if entries.isEmpty, !isDirectory.boolValue {
            diagnostics.append(.error("the flows directory is a file, not a directory", at: SourceLocation(file: directory.path, line: 1, column: 1)))
        }
        for file in entries.sorted(by: { $0.path < $1.path })
        where ["yaml", "yml"].contains(file.pathExtension) && !reserved.contains(file.lastPathComponent) {
            let name = display(file)
            guard let source = try? String(contentsOf: file, encoding: .utf8) else {
                diagnostics.append(.error("not readable as UTF-8 text", at: SourceLocation(file: name, line: 1, column: 1)))
                continue
            }
            let (flow, found) = FlowLoader.load(source: source, file: name)
            diagnostics += found
            if let flow, !flow.name.isEmpty {
                if let existing = flows[flow.name] {
                    diagnostics.append(.error("flow '\(flow.name)' is also defined in \(existing.file)", at: flow.location))
                }
                flows[flow.name] = flow
            }
        }
        let screensDirectory = directory.appendingPathComponent("screens")
        for file in ((try? fm.contentsOfDirectory(at: screensDirectory, includingPropertiesForKeys: nil)) ?? [])
            .sorted(by: { $0.path < $1.path }) where ["yaml", "yml"].contains(file.pathExtension)
        {
            let name = display(file)
            guard let source = try? String(contentsOf: file, encoding: .utf8) else {
                diagnostics.append(.error("not readable as UTF-8 text", at: SourceLocation(file: name, line: 1, column: 1)))
                continue
            }
            let (screen, found) = ScreenTemplate.load(source: source, file: name)
            diagnostics += found
            if let screen, !screen.name.isEmpty { screens[screen.name] = screen }
        }
        var services: [String: ServiceDefinition] = [:]
        let servicesFile = directory.appendingPathComponent(ServiceDefinitions.fileName)
        if fm.fileExists(atPath: servicesFile.path) {
            if let source = try? String(contentsOf: servicesFile, encoding: .utf8) {
                let (loaded, found) = ServiceDefinitions.load(source: source, file: display(servicesFile))
                services = loaded
                diagnostics += found
            } else {
                diagnostics.append(.error("not readable as UTF-8 text", at: SourceLocation(file: display(servicesFile), line: 1, column: 1)))
            }
        }
        var bundle = FlowBundle(flows: flows, screens: screens, diagnostics: diagnostics, directory: directory, services: services)
        let templateEvents: [String: [String]] = screens.mapValues(\.events)
        var linter = FlowLinter(catalog: catalog, templateEvents: { templateEvents[$0] })
        linter.services = services
        for name in flows.keys.sorted() { bundle.diagnostics += linter.lint(flows[name]!) }
        // A flow step renders synchronously inside its transaction: a template's service loads
        // are fetched only when the screen is served on its own.
        for name in flows.keys.sorted() {
            for state in flows[name]!.states.values {
                guard case .screen(let spec) = state.response, let template = spec.templateName.flatMap({ screens[$0] }),
                    let load = template.serviceLoads.first
                else { continue }
                bundle.diagnostics.append(
                    .warning(
                        "screen '\(template.name)' loads '\(load.name)' from a service, which a flow state does not fetch: it renders the fallback here (call the service in a transition instead)",
                        at: spec.location))
            }
        }
        var screenLinter = ScreenLinter(catalog: catalog)
        screenLinter.services = services
        bundle.diagnostics += screenLinter.lint(Array(screens.values))
        for check in extraChecks { bundle.diagnostics += check(bundle) }
        bundle.diagnostics = bundle.diagnostics.ordered
        return bundle
    }

    /// The declaration of service `name`, or the defaults for a service this bundle does not
    /// declare (a session pinned to an older definition may still call it).
    public func service(_ name: String) -> ServiceDefinition {
        services[name] ?? ServiceDefinition(name: name)
    }

    /// Engines for every flow, sharing the screen templates.
    public var engines: [String: FlowEngine] {
        flows.mapValues { FlowEngine(flow: $0, screens: screens) }
    }
}

/// A further check over the whole bundle (the contract and deep-link layers add theirs).
public typealias FlowBundleCheck = @Sendable (FlowBundle) -> [Diagnostic]

/// Checks screen templates: loaders and references exist; standalone screens cannot send
/// flow events (they have no session to send them to).
public struct ScreenLinter: Sendable {
    public var catalog: FlowCatalog
    /// The services of `services.yaml`, or nil when service loads' names are not checked.
    public var services: [String: ServiceDefinition]?

    public init(catalog: FlowCatalog) { self.catalog = catalog }

    public func lint(_ screens: [ScreenTemplate]) -> [Diagnostic] {
        var findings: [Diagnostic] = []
        for screen in screens {
            let parameters = Set(screen.parameters.map(\.name))
            let data = Set(screen.loads.map(\.name) + screen.serviceLoads.map(\.name))
            for load in screen.serviceLoads {
                if let services, services[load.call.service] == nil {
                    let hint = Suggest.closest(load.call.service, in: services.keys).map { "; did you mean '\($0)'?" } ?? ""
                    findings.append(.error("unknown service '\(load.call.service)'\(hint)", at: load.call.location))
                }
                var references = load.call.path.references.map { ($0, load.call.location) }
                for (_, value) in load.call.query { references += value.references.map { ($0, load.call.location) } }
                for (path, location) in references where !["params", "subject"].contains(path.first ?? "") {
                    findings.append(
                        .error("'{{\(path.joined(separator: "."))}}': a service load is fetched before anything else, so it sees only params and subject", at: location))
                }
            }
            for load in screen.loads {
                guard let signature = catalog.loaders[load.call.name] else {
                    let hint = Suggest.closest(load.call.name, in: catalog.loaders.keys).map { "; did you mean '\($0)'?" } ?? ""
                    findings.append(.error("unknown loader '\(load.call.name)'\(hint)", at: load.call.location))
                    continue
                }
                let declared = Set(signature.arguments.map(\.name))
                for argument in load.call.arguments where !declared.contains(argument.name) {
                    findings.append(.error("loader '\(load.call.name)' has no argument '\(argument.name)'", at: argument.location))
                }
                for spec in signature.arguments where spec.required && !load.call.arguments.contains(where: { $0.name == spec.name }) {
                    findings.append(.error("loader '\(load.call.name)' needs argument '\(spec.name)'", at: load.call.location))
                }
            }
            var references = screen.content.references()
            for load in screen.loads {
                for argument in load.call.arguments { references += argument.value.references() }
            }
            for reference in references {
                guard let location = reference.location, let head = reference.path.first else { continue }
                let dotted = reference.path.joined(separator: ".")
                switch head {
                case "params":
                    if reference.path.count > 1, !parameters.contains(reference.path[1]) {
                        findings.append(.error("'{{\(dotted)}}': screen '\(screen.name)' declares no parameter '\(reference.path[1])'", at: location))
                    }
                case "data":
                    if reference.path.count > 1, !data.contains(reference.path[1]) {
                        findings.append(.error("'{{\(dotted)}}': screen '\(screen.name)' loads no '\(reference.path[1])'", at: location))
                    }
                case "item", "index":
                    if !reference.inEach { findings.append(.error("'{{\(dotted)}}' is only defined inside each:", at: location)) }
                case "subject", "error":
                    break
                default:
                    findings.append(
                        .error("'{{\(dotted)}}' refers to '\(head)', which screens do not have (params, data, item, index, subject, error)", at: location))
                }
            }
            findings += fieldReferenceProblems(in: screen)
        }
        return findings
    }
}
