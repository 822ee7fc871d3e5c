/// Checks of references into what effects and loaders return (`{{result.name}}`,
/// `{{data.playlist.name}}`, `{{item.name}}`) against the fields they declare. A misspelt field
/// renders as empty text at run time, so it is an error here. Where the shape is not declared,
/// nothing is checked.
extension FlowLinter {
    /// Field-reference findings for one flow.
    func fieldReferenceProblems(in flow: FlowDefinition) -> [Diagnostic] {
        let sources = ResultSources(flow: flow).entering
        var checker = FieldReferenceChecker(catalog: catalog)
        for name in flow.stateOrder {
            guard let state = flow.states[name], let entering = sources[name] else { continue }
            checker.check(state, results: entering)
        }
        return checker.findings.all
    }
}

extension ScreenLinter {
    /// Field-reference findings for one screen template (its loads and content).
    func fieldReferenceProblems(in screen: ScreenTemplate) -> [Diagnostic] {
        var checker = FieldReferenceChecker(catalog: catalog)
        let context = checker.context(loads: screen.loads, results: [])
        for load in screen.loads { for argument in load.call.arguments { checker.check(argument.value, context) } }
        checker.check(screen.content, context)
        return checker.findings.all
    }
}

/// Which effect's result `{{result}}` may hold when a state is entered: the engine keeps the
/// last effect's data in the session, so it is whichever effect ran on some path to the state.
struct ResultSources {
    /// What `{{result}}` may be when a state answers or handles an event.
    var entering: [String: Set<ResultSource>] = [:]

    init(flow: FlowDefinition) {
        guard flow.states[flow.start] != nil else { return }
        entering[flow.start] = [.nothing]
        var queue = [flow.start]
        while let name = queue.popLast() {
            guard let state = flow.states[name], let sources = entering[name] else { continue }
            var reached: [(String, Set<ResultSource>)] = []
            var transitions: [Transition] = state.handlerOrder.compactMap { state.handlers[$0] }
            if case .action(let transition) = state.response { transitions.append(transition) }
            for transition in transitions { Self.walk(transition, from: name, sources: sources, into: &reached) }
            for (target, added) in reached where flow.states[target] != nil {
                let before = entering[target] ?? []
                let after = before.union(added)
                if after != before {
                    entering[target] = after
                    queue.append(target)
                }
            }
        }
    }

    /// Where a transition can land and what `{{result}}` holds there. A stay re-answers the
    /// state itself, so it counts as landing on `state`.
    static func walk(_ transition: Transition, from state: String, sources: Set<ResultSource>, into reached: inout [(String, Set<ResultSource>)]) {
        func land(_ target: Target?, _ sources: Set<ResultSource>) {
            switch target {
            case .state(let name, _)?: reached.append((name, sources))
            case .stay?: reached.append((state, sources))
            case nil: break
            }
        }
        land(transition.guardElse, sources)
        for branch in transition.cases { walk(branch.transition, from: state, sources: sources, into: &reached) }
        if let otherwise = transition.otherwise { walk(otherwise.value, from: state, sources: sources, into: &reached) }
        let after: Set<ResultSource> = transition.effect.map { [.effect($0.name)] } ?? (transition.call != nil ? [.call] : sources)
        for outcome in transition.outcomes { land(outcome.target, after) }
        land(transition.to, after)
    }
}

/// One possible origin of `{{result}}`.
enum ResultSource: Hashable {
    /// No effect has run yet.
    case nothing
    case effect(String)
    /// A service call: its result is the response's body, whose shape is the service's.
    case call
}

/// What a reference may reach, as far as declarations tell.
indirect enum FieldShape {
    /// Not declared: nothing below it is checked.
    case unknown
    /// A value without fields (text, number, flag).
    case scalar
    /// An object with these fields; `owner` says whose, for messages.
    case object([FieldSpec], owner: String)
    /// A list whose elements have this shape.
    case list(FieldShape, owner: String)

    init(_ field: FieldSpec, owner: String) {
        let owner = "'\(field.name)' of \(owner)"
        switch field.type {
        case .string, .int, .bool: self = .scalar
        case .any: self = .unknown
        case .object: self = field.fields.map { .object($0, owner: owner) } ?? .unknown
        case .list: self = .list(field.fields.map { .object($0, owner: "each element of \(owner)") } ?? .unknown, owner: owner)
        }
    }

    /// The shape of what a loader returns.
    init(loader signature: CallSignature?) {
        guard let signature else {
            self = .unknown
            return
        }
        let owner = "loader '\(signature.name)'"
        guard let fields = signature.fields else {
            self = signature.returnsList ? .list(.unknown, owner: owner) : .unknown
            return
        }
        self = signature.returnsList ? .list(.object(fields, owner: "each element of \(owner)"), owner: owner) : .object(fields, owner: owner)
    }

    /// The shape of one element, for `each:` and `optionsFrom`.
    var element: FieldShape {
        if case .list(let element, _) = self { return element }
        return .unknown
    }
}

/// Walks a flow's or screen's templates with what `result`, `data` and `item` hold at each
/// place, and reports references to fields that are not declared.
struct FieldReferenceChecker {
    let catalog: FlowCatalog
    var findings = Findings()

    init(catalog: FlowCatalog) { self.catalog = catalog }

    /// What the namespaces hold at one place in a flow.
    struct Context {
        var result: FieldShape
        var data: [String: FieldShape]
        var item: FieldShape = .unknown
        /// The members `{{input.…}}` has while an event is handled: only what was validated is
        /// kept (an input state's submission; a transition's `input:` rules). Nil where that is
        /// not known here (an action state, a screen's own templates), and nothing is checked.
        var input: Set<String>?
    }

    func context(loads: [LoaderCall], results: Set<ResultSource>) -> Context {
        var data: [String: FieldShape] = [:]
        for load in loads { data[load.name] = FieldShape(loader: catalog.loaders[load.call.name]) }
        return Context(result: resultShape(results), data: data)
    }

    /// The fields `{{result}}` has when it may come from any of `sources`: checked only when
    /// every possible effect declares its fields.
    func resultShape(_ sources: Set<ResultSource>) -> FieldShape {
        let effects = sources.compactMap { if case .effect(let name) = $0 { name } else { nil } }.sorted()
        guard !effects.isEmpty, !sources.contains(.call) else { return .unknown }
        var fields: [FieldSpec] = []
        for name in effects {
            guard let declared = catalog.effects[name]?.fields else { return .unknown }
            fields += declared.filter { field in !fields.contains { $0.name == field.name } }
        }
        let names = effects.map { "'\($0)'" }.joined(separator: " or ")
        let owner = effects.count == 1 ? "the result of effect \(names)" : "the result of effects \(names)"
        return .object(fields, owner: owner)
    }

    // MARK: - Flow states

    mutating func check(_ state: FlowState, results: Set<ResultSource>) {
        let context = self.context(loads: state.loads, results: results)
        for load in state.loads { check(load.call, context) }
        switch state.response {
        case .input(let input):
            let texts = [
                input.title, input.message, input.placeholder, input.value, input.submitTitle, input.cancelTitle,
                input.validation.patternMessage,
            ]
            for text in texts.compactMap({ $0 }) { check(text, context) }
            for option in input.options { for text in [option.id, option.title, option.subtitle].compactMap({ $0 }) { check(text, context) } }
            if let source = input.optionsFrom {
                check(source.loader.call, context)
                var itemContext = context
                itemContext.item = FieldShape(loader: catalog.loaders[source.loader.call.name]).element
                for text in [source.id, source.title, source.subtitle].compactMap({ $0 }) { check(text, itemContext) }
            }
        case .screen(let screen):
            if let inline = screen.inline { check(inline, context) }
            for (_, value) in screen.templateParams { check(value, context) }
        case .done(let done):
            if let message = done.message { check(message, context) }
        case .error(let error):
            check(error.message, context)
        case .refresh:
            break
        case .action(let transition):
            check(transition, context)
        }
        for event in state.handlerOrder {
            guard let transition = state.handlers[event] else { continue }
            var handling = context
            if case .input(let input) = state.response, event == "submit" {
                handling.input = input.kind == .text ? ["text", "value"] : ["choice", "choices", "value"]
            } else {
                handling.input = []
            }
            check(transition, handling)
        }
    }

    mutating func check(_ transition: Transition, _ context: Context) {
        var context = context
        if let rules = transition.input {
            // Its message sees the text being checked as `{{input.value}}`.
            var checking = context
            checking.input = nil
            if let message = rules.patternMessage { check(message, checking) }
            context.input = context.input.map { $0.union(rules.accept).union(["value"]) }
        }
        if let guardCall = transition.guardCall { check(guardCall, context) }
        check(transition.guardElse, context)
        if let match = transition.match { check(match, context) }
        for branch in transition.cases { check(branch.transition, context) }
        if let otherwise = transition.otherwise { check(otherwise.value, context) }
        var after = context
        if let effect = transition.effect {
            check(effect, context)
            after.result = resultShape([.effect(effect.name)])
        }
        if transition.call != nil { after.result = .unknown }
        for outcome in transition.outcomes { check(outcome.target, after) }
        check(transition.to, after)
    }

    mutating func check(_ target: Target?, _ context: Context) {
        if case .stay(let message, _)? = target { check(message, context) }
    }

    mutating func check(_ call: NamedCall, _ context: Context) {
        for argument in call.arguments { check(argument.value, context) }
    }

    // MARK: - Templates

    mutating func check(_ template: TemplateString, _ context: Context) {
        guard let location = template.location else { return }
        for path in template.references { check(path, at: location, context) }
    }

    /// A JSON template: `each:` gives its mapping an `item` of the list's element shape.
    mutating func check(_ tree: JSONTemplate, _ context: Context) {
        switch tree {
        case .null, .bool, .int, .double: break
        case .text(let template): check(template, context)
        case .array(let items): for item in items { check(item, context) }
        case .object(let pairs, let when, let each, let location):
            var inner = context
            if let each {
                if let location { check(each, at: location, context) }
                inner.item = resolve(each, context).element
            }
            if let when, let location { check(when.path, at: location, inner) }
            for (_, value) in pairs { check(value, inner) }
        }
    }

    mutating func check(_ path: [String], at location: SourceLocation, _ context: Context) {
        if let problem = problem(path, context) { findings.error(problem, location) }
        if path.count >= 2, path[0] == "input", let kept = context.input, !kept.contains(path[1]) {
            findings.warning(
                "'{{\(path.joined(separator: "."))}}' is empty here: a command's input is kept only as validated, by an input state's submit or a transition's input: rules, and nothing here validates '\(path[1])'",
                location)
        }
    }

    // MARK: - Resolution

    /// The shape at the root of a reference, and how many of its components that used.
    func root(_ path: [String], _ context: Context) -> (FieldShape, used: Int) {
        switch path.first ?? "" {
        case "result": return (context.result, 1)
        case "item": return (context.item, 1)
        case "data":
            // An unknown load name is the main linter's finding, not a field problem.
            guard path.count > 1, let shape = context.data[path[1]] else { return (.unknown, path.count) }
            return (shape, 2)
        default: return (.unknown, path.count)
        }
    }

    /// What `path` reaches, or `.unknown` when it cannot be told (or is a misspelling, which
    /// ``problem(_:_:)`` reports).
    func resolve(_ path: [String], _ context: Context) -> FieldShape {
        let (start, used) = root(path, context)
        var shape = start
        for component in path.dropFirst(used) {
            switch shape {
            case .object(let fields, let owner):
                guard let field = fields.first(where: { $0.name == component }) else { return .unknown }
                shape = FieldShape(field, owner: owner)
            case .list(let element, _):
                guard Int(component) != nil else { return .unknown }
                shape = element
            case .scalar, .unknown:
                return .unknown
            }
        }
        return shape
    }

    /// The first component of `path` that names a field its object does not declare.
    func problem(_ path: [String], _ context: Context) -> String? {
        let (start, used) = root(path, context)
        var shape = start
        for component in path.dropFirst(used) {
            switch shape {
            case .object(let fields, let owner):
                guard let field = fields.first(where: { $0.name == component }) else {
                    let names = fields.map(\.name)
                    let dotted = path.joined(separator: ".")
                    let hint: String
                    if let closest = Suggest.closestSpelling(component, in: names) {
                        hint = "; did you mean '\(closest)'?"
                    } else {
                        hint = names.isEmpty ? " (it has no fields)" : " (it has \(names.joined(separator: ", ")))"
                    }
                    return "'{{\(dotted)}}': no field '\(component)' in \(owner)\(hint)"
                }
                shape = FieldShape(field, owner: owner)
            case .list(let element, let owner):
                guard Int(component) != nil else {
                    // A list has elements, not members: this renders as empty text.
                    let dotted = path.joined(separator: ".")
                    return "'{{\(dotted)}}': \(owner) is a list, which has no field '\(component)' (use each: or optionsFrom, or an index such as .0)"
                }
                shape = element
            case .scalar, .unknown:
                return nil
            }
        }
        return nil
    }
}

extension Suggest {
    /// Like ``closest(_:in:)``, but swapping two neighbouring letters counts as one edit (so
    /// `nmae` suggests `name`), and ties go to the first candidate in order.
    public static func closestSpelling(_ word: String, in candidates: [String]) -> String? {
        let scored = candidates.map { ($0, transposingDistance(Array(word.lowercased()), Array($0.lowercased()))) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= max(1, word.count / 3) else { return nil }
        return best.0
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and
    /// transpositions of neighbours each cost one.
    static func transposingDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var table = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }
}
