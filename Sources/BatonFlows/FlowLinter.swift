import BatonJSON

/// Checks a loaded flow against itself and against what the application registered.
///
/// Each finding names the file, line and column of the thing to fix. Errors stop the server
/// from starting; warnings do not.
public struct FlowLinter: Sendable {
    public var catalog: FlowCatalog
    /// The events each named screen template sends (for screen states that use a template),
    /// or nil when no such template exists.
    public var templateEvents: @Sendable (String) -> [String]?
    /// The services of `services.yaml`, or nil when calls' service names are not checked.
    public var services: [String: ServiceDefinition]?

    /// The names templates may reference at the top level.
    public static let namespaces: Set<String> = [
        "params", "input", "inputs", "result", "data", "item", "index", "error", "subject",
    ]

    public init(catalog: FlowCatalog, templateEvents: @escaping @Sendable (String) -> [String]? = { _ in nil }) {
        self.catalog = catalog
        self.templateEvents = templateEvents
    }

    public func lint(_ flow: FlowDefinition) -> [Diagnostic] {
        var findings = Findings()
        let stateNames = Set(flow.states.keys)

        // Start state.
        if !flow.start.isEmpty, flow.states[flow.start] == nil {
            findings.error(
                "start state '\(flow.start)' does not exist\(suggestion(flow.start, stateNames))", flow.location)
        }

        for name in flow.stateOrder {
            guard let state = flow.states[name] else { continue }
            lint(state, in: flow, stateNames: stateNames, findings: &findings)
        }

        // Reachability from the start.
        if flow.states[flow.start] != nil {
            var reached: Set<String> = [flow.start]
            var queue = [flow.start]
            while let current = queue.popLast() {
                guard let state = flow.states[current] else { continue }
                for next in Self.successors(of: state) where !reached.contains(next) && flow.states[next] != nil {
                    reached.insert(next)
                    queue.append(next)
                }
            }
            for name in flow.stateOrder where !reached.contains(name) {
                findings.error("state '\(name)' is unreachable from the start state '\(flow.start)'", flow.states[name]!.location)
            }
        }
        for loop in Self.actionLoops(in: flow) {
            guard let first = flow.states[loop.cycle[0]] else { continue }
            let path = (loop.cycle + [loop.cycle[0]]).map { "'\($0)'" }.joined(separator: " → ")
            let text = "action states \(path) form a loop with no answer between them"
            if loop.closed {
                // Nothing any outcome, case or guard can say leads out: every command that enters
                // goes round until refused, and the flow can never finish.
                findings.error(
                    text + " and no way out: no outcome, case or guard's else leads to another state, so every command that enters "
                        + "is refused after \(FlowEngine.maxHops) action states; give one of them a way to another state",
                    first.location)
            } else if loop.calls {
                // Each turn calls a service again, and a failing one sends the command round.
                findings.error(
                    text + ": a command would go round it, calling the service each time, until refused after \(FlowEngine.maxHops) "
                        + "action states; let a state that answers (an input, a screen, an error with retry) come between",
                    first.location)
            } else {
                // A loop through effects or matches may end when an effect's outcome changes.
                findings.warning(
                    text + ": unless an effect's outcome ends it, a command goes round until refused after \(FlowEngine.maxHops) action states",
                    first.location)
            }
        }
        findings.all += fieldReferenceProblems(in: flow)
        return findings.all
    }

    /// Whether a transition (or one of its cases) calls a service.
    static func makesCall(_ transition: Transition) -> Bool {
        transition.call != nil || transition.cases.contains { makesCall($0.transition) } || (transition.otherwise.map { makesCall($0.value) } ?? false)
    }

    /// The loops of action states (through an effect's or a call's outcomes, a match or a guard):
    /// states that answer nothing, so one command would pass through them again and again. One
    /// per set of states that lead back to each other (a strongly connected component), so a loop
    /// is never hidden behind another that shares a state with it. Each is shown as one cycle:
    /// through a state that calls a service when the set has one (`calls`), else from its first
    /// state in file order.
    static func actionLoops(in flow: FlowDefinition) -> [(cycle: [String], calls: Bool, closed: Bool)] {
        func next(_ name: String) -> [String] {
            guard case .action(let transition)? = flow.states[name]?.response else { return [] }
            return targets(of: transition).filter { target in
                if case .action? = flow.states[target]?.response { return true }
                return false
            }
        }
        func calls(_ name: String) -> Bool {
            guard case .action(let transition)? = flow.states[name]?.response else { return false }
            return makesCall(transition)
        }
        // Tarjan's strongly connected components.
        var index: [String: Int] = [:]
        var lowest: [String: Int] = [:]
        var stack: [String] = []
        var onStack: Set<String> = []
        var components: [[String]] = []
        func connect(_ name: String) {
            index[name] = index.count
            lowest[name] = index[name]
            stack.append(name)
            onStack.insert(name)
            for target in next(name) {
                if index[target] == nil {
                    connect(target)
                    lowest[name] = min(lowest[name]!, lowest[target]!)
                } else if onStack.contains(target) {
                    lowest[name] = min(lowest[name]!, index[target]!)
                }
            }
            guard lowest[name] == index[name] else { return }
            var component: [String] = []
            while let top = stack.popLast() {
                onStack.remove(top)
                component.append(top)
                if top == name { break }
            }
            components.append(component)
        }
        for name in flow.stateOrder where index[name] == nil { connect(name) }

        var loops: [(cycle: [String], calls: Bool, closed: Bool)] = []
        for component in components {
            let members = Set(component)
            guard members.count > 1 || next(component[0]).contains(component[0]) else { continue }
            let ordered = flow.stateOrder.filter(members.contains)
            let callers = ordered.filter(calls)
            let start = callers.first ?? ordered[0]
            // The shortest way from `start` back to it, inside the component.
            var previous: [String: String] = [:]
            var queue = [start]
            var found = false
            search: while !queue.isEmpty {
                let current = queue.removeFirst()
                for target in next(current) where members.contains(target) {
                    if target == start {
                        previous[start] = current
                        found = true
                        break search
                    }
                    if previous[target] == nil {
                        previous[target] = current
                        queue.append(target)
                    }
                }
            }
            guard found else { continue }
            var cycle = [start]
            var at = previous[start]!
            while at != start {
                cycle.insert(at, at: 1)
                at = previous[at]!
            }
            let closed = !ordered.contains { name in
                guard case .action(let transition)? = flow.states[name]?.response else { return true }
                return Self.leaves(transition, members)
            }
            loops.append((cycle, !callers.isEmpty, closed))
        }
        return loops.sorted { flow.stateOrder.firstIndex(of: $0.cycle[0])! < flow.stateOrder.firstIndex(of: $1.cycle[0])! }
    }

    /// Whether `transition` can lead to a state outside `members`. A stay does not count: in an
    /// action state it has nothing to answer with (lint refuses an `error:` target there; a guard
    /// without `else`, a match without `otherwise` or input rules that refuse stay too), so the
    /// command fails either way.
    static func leaves(_ transition: Transition, _ members: Set<String>) -> Bool {
        func out(_ target: Target?) -> Bool { target?.stateName.map { !members.contains($0) } ?? false }
        if out(transition.to) || out(transition.guardElse) || transition.outcomes.contains(where: { out($0.target) }) { return true }
        if let otherwise = transition.otherwise, leaves(otherwise.value, members) { return true }
        return transition.cases.contains { leaves($0.transition, members) }
    }

    /// Every state a state's transitions can lead to.
    public static func successors(of state: FlowState) -> [String] {
        var names: [String] = []
        if case .action(let transition) = state.response { names += targets(of: transition) }
        for event in state.handlerOrder { names += targets(of: state.handlers[event]!) }
        return names
    }

    static func targets(of transition: Transition) -> [String] {
        var names: [String] = []
        if let name = transition.to?.stateName { names.append(name) }
        if let name = transition.guardElse?.stateName { names.append(name) }
        names += transition.outcomes.compactMap { $0.target.stateName }
        for (_, sub) in transition.cases { names += targets(of: sub) }
        if let otherwise = transition.otherwise { names += targets(of: otherwise.value) }
        return names
    }

    // MARK: - States

    private func lint(_ state: FlowState, in flow: FlowDefinition, stateNames: Set<String>, findings: inout Findings) {
        let data = Set(state.loads.map(\.name))
        let scope = ScopeRules(parameters: Set(flow.parameters.map(\.name)), data: data, states: stateNames)
        for load in state.loads { lintCall(load.call, kind: .loader, scope: scope, findings: &findings) }

        var emitted = state.emittedEvents
        switch state.response {
        case .input(let input):
            for template in [input.title, input.message, input.placeholder, input.value, input.submitTitle, input.cancelTitle]
                .compactMap({ $0 })
            {
                check(template, scope: scope, findings: &findings)
            }
            if let message = input.validation.patternMessage { check(message, scope: scope, findings: &findings) }
            for option in input.options {
                [option.id, option.title].forEach { check($0, scope: scope, findings: &findings) }
            }
            if let source = input.optionsFrom {
                lintCall(source.loader.call, kind: .loader, scope: scope, findings: &findings)
                if let signature = catalog.loaders[source.loader.call.name], !signature.returnsList {
                    findings.error("loader '\(signature.name)' returns one value, not a list; optionsFrom needs a list", source.loader.call.location)
                }
                let itemScope = scope.inItem
                [source.id, source.title].forEach { check($0, scope: itemScope, findings: &findings) }
                if let subtitle = source.subtitle { check(subtitle, scope: itemScope, findings: &findings) }
            }
        case .screen(let screen):
            if let inline = screen.inline { checkTree(inline, scope: scope, findings: &findings) }
            if let templateName = screen.templateName {
                if let events = templateEvents(templateName) {
                    emitted = events
                } else {
                    findings.error("screen template '\(templateName)' does not exist in Flows/screens/", screen.location)
                }
                for (_, value) in screen.templateParams { checkTree(value, scope: scope, findings: &findings) }
            }
        case .done(let done):
            if let message = done.message { check(message, scope: scope, findings: &findings) }
        case .refresh:
            break
        case .error(let error):
            check(error.message, scope: scope, findings: &findings)
        case .action(let transition):
            lint(transition, event: nil, in: flow, state: state, stateNames: stateNames, scope: scope, findings: &findings)
        }

        // Handlers against emitted events.
        for event in state.handlerOrder {
            let transition = state.handlers[event]!
            if state.isTerminal {
                findings.warning("state '\(state.name)' ends the flow, so its handler for '\(event)' never runs", transition.location)
            } else if !emitted.contains(event) {
                let sent = emitted.isEmpty ? "no events" : emitted.map { "'\($0)'" }.joined(separator: ", ")
                findings.warning(
                    "no action of state '\(state.name)' sends event '\(event)' (it sends \(sent))\(suggestion(event, Set(emitted)))",
                    transition.location)
            }
            lint(transition, event: event, in: flow, state: state, stateNames: stateNames, scope: scope.withInput, findings: &findings)
        }
        if !state.isTerminal, case .action = state.response {} else if !state.isTerminal {
            for event in emitted where state.handlers[event] == nil {
                findings.error("state '\(state.name)' sends event '\(event)' but has no handler for it (add on: \(event): …)", state.location)
            }
            if emitted.isEmpty {
                findings.error(
                    "state '\(state.name)' is a dead end: it does not end the flow and offers no action that leaves it", state.location)
            }
        }
    }

    private func lint(
        _ transition: Transition, event: String?, in flow: FlowDefinition, state: FlowState, stateNames: Set<String>,
        scope: ScopeRules, findings: inout Findings
    ) {
        func checkTarget(_ target: Target?) {
            switch target {
            case .state(let name, let location)?:
                if !stateNames.contains(name) {
                    findings.error("unknown state '\(name)'\(suggestion(name, stateNames))", location)
                }
            case .stay(let message, let location)?:
                check(message, scope: scope, findings: &findings)
                if case .action = state.response {
                    findings.error("an action state has no answer of its own to repeat with an error; go to a state instead", location)
                }
            case nil:
                break
            }
        }
        if let validation = transition.input, let message = validation.patternMessage { check(message, scope: scope, findings: &findings) }
        if let guardCall = transition.guardCall { lintCall(guardCall, kind: .guard, scope: scope, findings: &findings) }
        checkTarget(transition.guardElse)
        if let match = transition.match { check(match, scope: scope, findings: &findings) }
        for (_, sub) in transition.cases {
            lint(sub, event: event, in: flow, state: state, stateNames: stateNames, scope: scope, findings: &findings)
        }
        if let otherwise = transition.otherwise {
            lint(otherwise.value, event: event, in: flow, state: state, stateNames: stateNames, scope: scope, findings: &findings)
        }
        if let effect = transition.effect {
            lintCall(effect, kind: .effect, scope: scope, findings: &findings)
            if let signature = catalog.effects[effect.name] {
                let declared = Set(signature.outcomes)
                for (outcome, _, location) in transition.outcomes where !declared.contains(outcome) {
                    findings.error(
                        "effect '\(effect.name)' has no outcome '\(outcome)' (it returns \(signature.outcomes.joined(separator: ", ")))\(suggestion(outcome, declared))",
                        location)
                }
                let handled = Set(transition.outcomes.map(\.outcome))
                if transition.to == nil {
                    for outcome in signature.outcomes where !handled.contains(outcome) {
                        findings.error(
                            "outcome '\(outcome)' of effect '\(effect.name)' is not handled (add it to outcomes, or add to: <state> for the rest)",
                            effect.location)
                    }
                }
            }
            for (_, target, _) in transition.outcomes { checkTarget(target) }
        }
        if let call = transition.call {
            lintServiceCall(call, transition: transition, scope: scope, findings: &findings)
            for (_, target, _) in transition.outcomes { checkTarget(target) }
        }
        checkTarget(transition.to)
    }

    // MARK: - Calls

    /// A service call: the service exists, its outcomes are status codes (`404`, `4xx`) or
    /// failures, a success is handled, and so is every failure (each by name, or `unavailable`).
    private func lintServiceCall(_ call: ServiceCallSpec, transition: Transition, scope: ScopeRules, findings: inout Findings) {
        if let services, services[call.service] == nil {
            let known = services.isEmpty ? " (Flows/services.yaml declares none)" : suggestion(call.service, Set(services.keys))
            findings.error("unknown service '\(call.service)'\(known)", call.location)
        }
        check(call.path, scope: scope, findings: &findings)
        for (_, value) in call.query { check(value, scope: scope, findings: &findings) }
        if let body = call.body { checkTree(body, scope: scope, findings: &findings) }
        let failures = Set(ServiceFailure.allCases.map(\.rawValue))
        let handled = Set(transition.outcomes.map(\.outcome))
        for (outcome, _, location) in transition.outcomes where !Self.isCallOutcome(outcome) {
            let hint = suggestion(outcome, failures.union(["unavailable"]))
            findings.error(
                "'\(outcome)' is not a call outcome: use a status (200, 404), a status class (2xx, 4xx) or a failure (\(ServiceFailure.allCases.map(\.rawValue).joined(separator: ", ")), unavailable)\(hint)",
                location)
        }
        if !handled.contains(where: { $0.hasPrefix("2") }), transition.to == nil {
            findings.error("the call to '\(call.service)' handles no success: add an outcome for 2xx (or its status, such as 200)", call.location)
        }
        if !handled.contains("unavailable") {
            let missing = ServiceFailure.allCases.map(\.rawValue).filter { !handled.contains($0) }
            if !missing.isEmpty {
                findings.error(
                    "the call to '\(call.service)' does not handle \(missing.joined(separator: ", ")): add 'unavailable' (every failure) or each of them to outcomes",
                    call.location)
            }
        }
    }

    /// `200`, `4xx`, a failure name or `unavailable`.
    static func isCallOutcome(_ outcome: String) -> Bool {
        if outcome == "unavailable" || ServiceFailure(rawValue: outcome) != nil { return true }
        let characters = Array(outcome)
        guard characters.count == 3, let first = characters[0].wholeNumberValue, (1...5).contains(first) else { return false }
        if characters[1] == "x", characters[2] == "x" { return true }
        return characters[1].isNumber && characters[2].isNumber
    }

    enum CallKind: String { case effect, `guard`, loader }

    private func lintCall(_ call: NamedCall, kind: CallKind, scope: ScopeRules, findings: inout Findings) {
        let registry: [String: CallSignature]
        switch kind {
        case .effect: registry = catalog.effects
        case .guard: registry = catalog.guards
        case .loader: registry = catalog.loaders
        }
        for argument in call.arguments { checkTree(argument.value, scope: scope, findings: &findings) }
        guard let signature = registry[call.name] else {
            findings.error("unknown \(kind.rawValue) '\(call.name)'\(suggestion(call.name, Set(registry.keys)))", call.location)
            return
        }
        let declared = Dictionary(signature.arguments.map { ($0.name, $0) }, uniquingKeysWith: { $1 })
        for argument in call.arguments {
            guard let spec = declared[argument.name] else {
                findings.error(
                    "\(kind.rawValue) '\(call.name)' has no argument '\(argument.name)'\(suggestion(argument.name, Set(declared.keys)))",
                    argument.location)
                continue
            }
            if let problem = Self.typeProblem(argument.value, expected: spec.type) {
                findings.error("argument '\(argument.name)' of '\(call.name)' \(problem)", argument.location)
            }
        }
        let given = Set(call.arguments.map(\.name))
        for spec in signature.arguments where spec.required && !given.contains(spec.name) {
            findings.error("\(kind.rawValue) '\(call.name)' needs argument '\(spec.name)'", call.location)
        }
    }

    /// Literal values must match the declared type; references are checked at run time.
    static func typeProblem(_ value: JSONTemplate, expected: ArgumentType) -> String? {
        switch (expected, value) {
        case (.any, _): return nil
        case (_, .text(let template)) where !template.isLiteral: return nil
        case (.string, .text): return nil
        case (.int, .int): return nil
        case (.bool, .bool): return nil
        default: return "must be \(expected.rawValue)"
        }
    }

    // MARK: - References

    struct ScopeRules {
        var parameters: Set<String>
        var data: Set<String>
        var states: Set<String> = []
        var item = false

        var inItem: ScopeRules {
            var copy = self
            copy.item = true
            return copy
        }
        var withInput: ScopeRules { self }
    }

    private func check(_ template: TemplateString, scope: ScopeRules, findings: inout Findings) {
        for path in template.references {
            if let problem = problem(path, scope: scope, inEach: false), let location = template.location {
                findings.error(problem, location)
            }
        }
    }

    private func checkTree(_ tree: JSONTemplate, scope: ScopeRules, findings: inout Findings) {
        for reference in tree.references() {
            if let problem = problem(reference.path, scope: scope, inEach: reference.inEach), let location = reference.location {
                findings.error(problem, location)
            }
        }
    }

    private func problem(_ path: [String], scope: ScopeRules, inEach: Bool) -> String? {
        let dotted = path.joined(separator: ".")
        guard let head = path.first else { return nil }
        guard Self.namespaces.contains(head) else {
            return "'{{\(dotted)}}' refers to '\(head)', which does not exist (use one of \(Self.namespaces.sorted().joined(separator: ", ")))\(suggestion(head, Self.namespaces))"
        }
        switch head {
        case "params":
            if path.count > 1, !scope.parameters.contains(path[1]) {
                return "'{{\(dotted)}}': the flow declares no parameter '\(path[1])'\(suggestion(path[1], scope.parameters))"
            }
        case "data":
            if path.count > 1, !scope.data.contains(path[1]) {
                return "'{{\(dotted)}}': this state loads no '\(path[1])' (declare it under load:)\(suggestion(path[1], scope.data))"
            }
        case "inputs":
            if path.count > 1, !scope.states.contains(path[1]) {
                return "'{{\(dotted)}}': there is no state '\(path[1])' whose input it could be\(suggestion(path[1], scope.states))"
            }
        case "item", "index":
            if !scope.item && !inEach { return "'{{\(dotted)}}' is only defined inside each: or optionsFrom" }
        default:
            break
        }
        return nil
    }

    private func suggestion(_ word: String, _ candidates: Set<String>) -> String {
        Suggest.closest(word, in: candidates).map { "; did you mean '\($0)'?" } ?? ""
    }
}

/// Accumulates diagnostics.
struct Findings {
    var all: [Diagnostic] = []
    mutating func error(_ message: String, _ location: SourceLocation) { all.append(.error(message, at: location)) }
    mutating func warning(_ message: String, _ location: SourceLocation) { all.append(.warning(message, at: location)) }
}
