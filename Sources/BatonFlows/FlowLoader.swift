import BatonJSON
import Crypto
import Foundation

/// Turns flow files into ``FlowDefinition``s, reporting every problem with its position
/// instead of stopping at the first.
public enum FlowLoader {
    /// The keys each kind of mapping accepts; the JSON Schema in `Flows/schema/` is checked
    /// against these by a test, so editor completion and the loader never drift apart.
    public enum Keys {
        public static let flow: Set<String> = ["flow", "title", "auth", "ttl", "params", "start", "states"]
        public static let parameter: Set<String> = ["required", "pattern", "maxLength"]
        public static let state: Set<String> = Set([
            "description", "load", "input", "screen", "done", "refresh", "error", "result", "on",
        ]).union(transition)
        public static let input: Set<String> = [
            "title", "message", "kind", "placeholder", "value", "trim", "uppercase", "minLength", "maxLength", "pattern",
            "patternMessage", "options", "optionsFrom", "multiple", "submit", "cancel",
        ]
        public static let option: Set<String> = ["id", "title", "subtitle"]
        public static let optionsFrom: Set<String> = ["from", "with", "id", "title", "subtitle"]
        public static let load: Set<String> = ["from", "with"]
        public static let screen: Set<String> = [
            "presentation", "template", "params", "id", "title", "header", "sections", "secondaryButtons",
        ]
        public static let done: Set<String> = ["message", "refresh"]
        public static let error: Set<String> = ["message", "retry"]
        public static let transition: Set<String> = [
            "to", "error", "input", "guard", "else", "match", "cases", "otherwise", "do", "with", "call", "outcomes",
        ]
        public static let call: Set<String> = ["service", "method", "path", "query", "body", "timeout"]
        public static let guardCall: Set<String> = ["name", "with"]
        public static let validation: Set<String> = [
            "accept", "trim", "uppercase", "minLength", "maxLength", "pattern", "patternMessage", "required",
        ]
    }

    /// Loads one flow from its text. Returns the flow (when it could be built at all) and
    /// the problems found while reading it.
    public static func load(source: String, file: String) -> (FlowDefinition?, [Diagnostic]) {
        switch YAMLSource.parse(source, file: file) {
        case .failure(let diagnostic): return (nil, [diagnostic])
        case .success(let root):
            var reader = Reader(file: file)
            let flow = reader.flow(root, source: source)
            return (flow, reader.diagnostics)
        }
    }

    /// Lowercase hex SHA-256 of a flow's text: its identity in the database.
    public static func hash(_ source: String) -> String {
        Hex.encode(bytesOf: SHA256.hash(data: Data(source.utf8)))
    }

    /// Parses `15m`, `30s`, `2h`, `1d`.
    static func duration(_ text: String) -> Duration? {
        guard let unit = text.last, let amount = Int(text.dropLast()), amount > 0 else { return nil }
        switch unit {
        case "s": return .seconds(amount)
        case "m": return .seconds(amount * 60)
        case "h": return .seconds(amount * 3600)
        case "d": return .seconds(amount * 86400)
        default: return nil
        }
    }

    /// Parses a call timeout: `250ms`, `2s`; at most 30 seconds.
    static func callTimeout(_ text: String) -> Duration? {
        if text.hasSuffix("ms"), let amount = Int(text.dropLast(2)), amount > 0, amount <= 30_000 { return .milliseconds(amount) }
        if text.hasSuffix("s"), let amount = Int(text.dropLast()), amount > 0, amount <= 30 { return .seconds(amount) }
        return nil
    }

    static func isName(_ text: String) -> Bool {
        !text.isEmpty && text.count <= 64
            && text.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-" || $0 == "_") }
            && text.first!.isLetter
    }

    static func isCallName(_ text: String) -> Bool {
        !text.isEmpty && text.split(separator: ".", omittingEmptySubsequences: false).allSatisfy {
            !$0.isEmpty && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
        }
    }
}

/// The reading pass: shape checks with positions.
struct Reader: ShapeReader {
    let file: String
    var diagnostics: [Diagnostic] = []

    init(file: String) { self.file = file }

    mutating func error(_ message: String, _ location: SourceLocation) {
        diagnostics.append(.error(message, at: location))
    }

    // MARK: Generic helpers

    mutating func template(_ node: SourceNode?, _ what: String) -> TemplateString? {
        guard let scalar = text(node, what) else { return nil }
        do {
            return try TemplateString(parsing: scalar.text, location: scalar.location)
        } catch {
            self.error(error.message, scalar.location)
            return nil
        }
    }

    mutating func pattern(_ node: SourceNode?, _ what: String) -> String? {
        guard let scalar = text(node, what) else { return nil }
        do {
            _ = try Regex(scalar.text)
        } catch {
            self.error("\(what) is not a valid regular expression: \(error)", scalar.location)
            return nil
        }
        return scalar.text
    }

    mutating func call(name nameNode: SourceNode?, with withNode: SourceNode?, kind: String, at location: SourceLocation) -> NamedCall? {
        guard let name = text(nameNode, "\(kind) name") else { return nil }
        guard FlowLoader.isCallName(name.text) else {
            error("'\(name.text)' is not a valid \(kind) name (dotted words such as playlists.create)", name.location)
            return nil
        }
        var arguments: [(name: String, value: JSONTemplate, location: SourceLocation)] = []
        if let withNode {
            guard case .mapping(let pairs, _) = withNode else {
                error("'with' must be a mapping of argument names to values", withNode.location)
                return NamedCall(name: name.text, arguments: [], location: name.location)
            }
            for (key, value) in pairs {
                arguments.append((key.text, JSONTemplate.from(value, diagnostics: &diagnostics), key.location))
            }
        }
        return NamedCall(name: name.text, arguments: arguments, location: name.location)
    }

    // MARK: Flow

    mutating func flow(_ root: SourceNode, source: String) -> FlowDefinition? {
        let top = pairs(root, allowed: FlowLoader.Keys.flow, what: "a flow file")
        guard !top.isEmpty || root["flow"] != nil else { return nil }
        let nameNode = text(root["flow"], "flow")
        if nameNode == nil, root["flow"] == nil { error("missing 'flow: <name>'", root.location) }
        let name = nameNode?.text ?? ""
        if let nameNode, !FlowLoader.isName(name) {
            error("flow name '\(name)' must be lowercase letters, digits, '-' or '_', starting with a letter", nameNode.location)
        }
        let expectedFile = (file as NSString).lastPathComponent
        if let nameNode, FlowLoader.isName(name), expectedFile != "\(name).yaml", expectedFile != "\(name).yml" {
            error("flow '\(name)' must live in \(name).yaml (found in \(expectedFile))", nameNode.location)
        }
        var audience = FlowDefinition.Audience.user
        if let auth = text(root["auth"], "auth") {
            if let parsed = FlowDefinition.Audience(rawValue: auth.text) {
                audience = parsed
            } else {
                error("auth must be user, device or any; found '\(auth.text)'", auth.location)
            }
        }
        var ttl = Duration.seconds(15 * 60)
        if let ttlNode = text(root["ttl"], "ttl") {
            if let parsed = FlowLoader.duration(ttlNode.text) { ttl = parsed } else {
                error("ttl must look like 30s, 15m, 2h or 1d; found '\(ttlNode.text)'", ttlNode.location)
            }
        }
        var parameters: [ParameterSpec] = []
        if let paramsNode = root["params"] {
            if case .mapping(let paramPairs, _) = paramsNode {
                for (key, value) in paramPairs { parameters.append(parameter(key, value)) }
            } else {
                error("params must be a mapping of parameter names to {required, pattern, maxLength}", paramsNode.location)
            }
        }
        let start = text(root["start"], "start")
        if start == nil, root["start"] == nil { error("missing 'start: <state>'", root.location) }
        var states: [String: FlowState] = [:]
        var order: [String] = []
        if let statesNode = root["states"] {
            if case .mapping(let statePairs, _) = statesNode {
                for (key, value) in statePairs {
                    if !FlowLoader.isName(key.text) {
                        error("state name '\(key.text)' must be lowercase letters, digits, '-' or '_'", key.location)
                    }
                    if let state = state(key, value) {
                        states[key.text] = state
                        order.append(key.text)
                    }
                }
                if statePairs.isEmpty { error("a flow needs at least one state", statesNode.location) }
            } else {
                error("states must be a mapping of state names to states", statesNode.location)
            }
        } else {
            error("missing 'states:'", root.location)
        }
        return FlowDefinition(
            name: name, title: text(root["title"], "title")?.text, audience: audience, ttl: ttl, parameters: parameters,
            start: start?.text ?? "", states: states, stateOrder: order, file: file,
            location: nameNode?.location ?? root.location, source: source, hash: FlowLoader.hash(source))
    }

    private mutating func parameter(_ key: SourceScalar, _ node: SourceNode) -> ParameterSpec {
        var spec = ParameterSpec(name: key.text, required: true, pattern: nil, maxLength: 256, location: key.location)
        if !FlowLoader.isName(key.text.lowercased()) || key.text.contains("-") {
            error("parameter name '\(key.text)' must be letters, digits or '_'", key.location)
        }
        // `name: {}` or `name:` alone: a required text parameter.
        if case .scalar(let scalar) = node, scalar.text.isEmpty { return spec }
        let fields = pairs(node, allowed: FlowLoader.Keys.parameter, what: "parameter '\(key.text)'")
        _ = fields
        if let required = bool(node["required"], "required") { spec.required = required }
        spec.pattern = pattern(node["pattern"], "pattern")
        if let maxLength = int(node["maxLength"], "maxLength", minimum: 1) { spec.maxLength = maxLength }
        return spec
    }

    // MARK: States

    private mutating func state(_ key: SourceScalar, _ node: SourceNode) -> FlowState? {
        let what = "state '\(key.text)'"
        _ = pairs(node, allowed: FlowLoader.Keys.state, what: what)
        guard case .mapping = node else { return nil }
        var loads: [LoaderCall] = []
        if let loadNode = node["load"] {
            if case .mapping(let loadPairs, _) = loadNode {
                for (loadKey, loadValue) in loadPairs {
                    _ = pairs(loadValue, allowed: FlowLoader.Keys.load, what: "load '\(loadKey.text)'")
                    if let call = call(name: loadValue["from"], with: loadValue["with"], kind: "loader", at: loadKey.location) {
                        loads.append(LoaderCall(name: loadKey.text, call: call))
                    } else if loadValue["from"] == nil {
                        error("load '\(loadKey.text)' needs 'from: <loader>'", loadKey.location)
                    }
                }
            } else {
                error("load must be a mapping of names to loader calls", loadNode.location)
            }
        }
        let responseKeys = ["input", "screen", "done", "refresh", "error"].filter { node[$0] != nil }
        let hasAction = node["do"] != nil || node["call"] != nil || node["to"] != nil || node["match"] != nil
        var response: StateResponse?
        if responseKeys.count > 1 || (responseKeys.count == 1 && hasAction) {
            let all = responseKeys + (hasAction ? ["do/to/match"] : [])
            error("\(what) answers in more than one way (\(all.joined(separator: ", "))); choose one", key.location)
        }
        switch responseKeys.first {
        case "input": response = input(node["input"]!, state: key.text).map(StateResponse.input)
        case "screen": response = screen(node["screen"]!).map(StateResponse.screen)
        case "done": response = done(node["done"]!).map(StateResponse.done)
        case "refresh": response = .refresh
        case "error": response = errorResponse(node["error"]!).map(StateResponse.error)
        default:
            if hasAction {
                response = transition(node, what: what, isState: true).map(StateResponse.action)
            } else {
                error("\(what) needs a response: input, screen, done, refresh or error (or do/to for an action state)", key.location)
            }
        }
        var handlers: [String: Transition] = [:]
        var handlerOrder: [String] = []
        if let onNode = node["on"] {
            if case .mapping(let onPairs, _) = onNode {
                for (event, value) in onPairs {
                    if !FlowLoader.isName(event.text) {
                        error("event name '\(event.text)' must be lowercase letters, digits, '-' or '_'", event.location)
                    }
                    if let transition = transition(value, what: "event '\(event.text)'", isState: false) {
                        handlers[event.text] = transition
                        handlerOrder.append(event.text)
                    }
                }
            } else {
                error("on must be a mapping of event names to transitions", onNode.location)
            }
        }
        var result: SessionResult?
        if let resultNode = text(node["result"], "result") {
            if let parsed = SessionResult(rawValue: resultNode.text), parsed != .expired {
                result = parsed
            } else {
                error("result must be completed or cancelled; found '\(resultNode.text)'", resultNode.location)
            }
        }
        guard let response else { return nil }
        return FlowState(
            name: key.text, location: key.location, loads: loads, response: response, handlers: handlers,
            handlerOrder: handlerOrder, result: result)
    }

    private mutating func input(_ node: SourceNode, state: String) -> InputSpec? {
        _ = pairs(node, allowed: FlowLoader.Keys.input, what: "input")
        guard case .mapping = node else { return nil }
        var kind = InputSpec.Kind.text
        if let kindNode = text(node["kind"], "kind") {
            if let parsed = InputSpec.Kind(rawValue: kindNode.text) { kind = parsed } else {
                error("input kind must be text or choice; found '\(kindNode.text)'", kindNode.location)
            }
        }
        guard let title = template(node["title"], "title") else {
            if node["title"] == nil { error("input needs a title", node.location) }
            return nil
        }
        var validation = InputValidation.text
        validation.location = node.location
        validation.accept = kind == .text ? ["text"] : ["choice"]
        if let trim = bool(node["trim"], "trim") { validation.trim = trim }
        if let uppercase = bool(node["uppercase"], "uppercase") { validation.uppercase = uppercase }
        validation.minLength = int(node["minLength"], "minLength")
        validation.maxLength = int(node["maxLength"], "maxLength", minimum: 1)
        validation.pattern = pattern(node["pattern"], "pattern")
        validation.patternMessage = template(node["patternMessage"], "patternMessage")
        if let min = validation.minLength, let max = validation.maxLength, min > max {
            error("minLength \(min) is greater than maxLength \(max)", node["minLength"]!.location)
        }
        var options: [ChoiceOption] = []
        if let optionsNode = node["options"] {
            if case .sequence(let items, _) = optionsNode {
                for item in items {
                    _ = pairs(item, allowed: FlowLoader.Keys.option, what: "an option")
                    if let id = template(item["id"], "option id"), let optionTitle = template(item["title"], "option title") {
                        options.append(ChoiceOption(id: id, title: optionTitle, subtitle: template(item["subtitle"], "subtitle")))
                    } else if item["id"] == nil || item["title"] == nil {
                        error("an option needs id and title", item.location)
                    }
                }
            } else {
                error("options must be a list of {id, title}", optionsNode.location)
            }
        }
        var source: OptionsSource?
        if let fromNode = node["optionsFrom"] {
            _ = pairs(fromNode, allowed: FlowLoader.Keys.optionsFrom, what: "optionsFrom")
            if let call = call(name: fromNode["from"], with: fromNode["with"], kind: "loader", at: fromNode.location),
                let id = template(fromNode["id"], "id"), let optionTitle = template(fromNode["title"], "title")
            {
                source = OptionsSource(
                    loader: LoaderCall(name: "options", call: call), id: id, title: optionTitle,
                    subtitle: template(fromNode["subtitle"], "subtitle"))
            } else if fromNode["from"] == nil || fromNode["id"] == nil || fromNode["title"] == nil {
                error("optionsFrom needs from, id and title", fromNode.location)
            }
        }
        if kind == .choice, options.isEmpty, source == nil {
            error("a choice input needs options or optionsFrom", node.location)
        }
        if kind == .text, !options.isEmpty || source != nil {
            error("options only apply to kind: choice", node.location)
        }
        let cancel: TemplateString?
        if let cancelNode = node["cancel"], case .scalar(let scalar) = cancelNode, scalar.text == "false", !scalar.quoted {
            cancel = nil
        } else {
            cancel = template(node["cancel"], "cancel") ?? .literal("Cancel")
        }
        return InputSpec(
            kind: kind, title: title, message: template(node["message"], "message"),
            placeholder: template(node["placeholder"], "placeholder"), value: template(node["value"], "value"),
            validation: validation, options: options, optionsFrom: source, multiple: bool(node["multiple"], "multiple") ?? false,
            submitTitle: template(node["submit"], "submit") ?? .literal("Submit"), cancelTitle: cancel)
    }

    private mutating func screen(_ node: SourceNode) -> ScreenSpec? {
        _ = pairs(node, allowed: FlowLoader.Keys.screen, what: "screen")
        guard case .mapping(let fields, _) = node else { return nil }
        var presentation = ScreenSpec.Presentation.push
        if let presentationNode = text(node["presentation"], "presentation") {
            if let parsed = ScreenSpec.Presentation(rawValue: presentationNode.text) { presentation = parsed } else {
                error("presentation must be push, modal or replace; found '\(presentationNode.text)'", presentationNode.location)
            }
        }
        let templateName = text(node["template"], "template")?.text
        var params: [(String, JSONTemplate)] = []
        if let paramsNode = node["params"] {
            if case .mapping(let pairs, _) = paramsNode {
                for (key, value) in pairs { params.append((key.text, JSONTemplate.from(value, diagnostics: &diagnostics))) }
            } else {
                error("screen params must be a mapping", paramsNode.location)
            }
        }
        let inlineFields = fields.filter { !["presentation", "template", "params"].contains($0.key.text) }
        var inline: JSONTemplate?
        if templateName != nil, !inlineFields.isEmpty {
            error("a screen is either a template or inline content, not both", node.location)
        } else if templateName == nil {
            if inlineFields.isEmpty {
                error("a screen needs template: <name> or inline content (title, sections, ...)", node.location)
            } else {
                let content = SourceNode.mapping(inlineFields, node.location)
                inline = JSONTemplate.from(content, diagnostics: &diagnostics)
            }
        }
        if templateName == nil, !params.isEmpty {
            error("params only apply to a named template", node["params"]!.location)
        }
        let events = inline.map(ScreenEvents.commandEvents(in:)) ?? []
        return ScreenSpec(
            presentation: presentation, templateName: templateName, templateParams: params, inline: inline, events: events,
            location: node.location)
    }

    private mutating func done(_ node: SourceNode) -> DoneSpec? {
        if case .scalar(let scalar) = node, scalar.text.isEmpty { return DoneSpec(message: nil, refresh: .none) }
        _ = pairs(node, allowed: FlowLoader.Keys.done, what: "done")
        var refresh = DoneSpec.Refresh.none
        if let refreshNode = node["refresh"] {
            switch refreshNode {
            case .scalar(let scalar) where scalar.text == "true": refresh = .all
            case .scalar(let scalar) where scalar.text == "false": refresh = .none
            case .sequence(let items, _):
                refresh = .sections(items.compactMap { text($0, "section id")?.text })
            default:
                error("refresh must be true, false or a list of section ids", refreshNode.location)
            }
        }
        return DoneSpec(message: template(node["message"], "message"), refresh: refresh)
    }

    private mutating func errorResponse(_ node: SourceNode) -> ErrorSpec? {
        _ = pairs(node, allowed: FlowLoader.Keys.error, what: "error")
        guard let message = template(node["message"], "message") else {
            if node["message"] == nil { error("an error needs a message", node.location) }
            return nil
        }
        var retry: ErrorSpec.Retry?
        if let retryNode = text(node["retry"], "retry") {
            retry = retryNode.text == "restart" ? .restart : .event(retryNode.text)
        }
        return ErrorSpec(message: message, retry: retry)
    }

    // MARK: Transitions

    /// A transition: a state name, `{error: …}`, or a mapping with to/do/guard/match/....
    /// For action states the state's own mapping is read with the transition keys.
    mutating func transition(_ node: SourceNode, what: String, isState: Bool) -> Transition? {
        if case .scalar(let scalar) = node {
            return .goto(scalar.text, at: scalar.location)
        }
        if !isState { _ = pairs(node, allowed: FlowLoader.Keys.transition, what: what) }
        guard case .mapping = node else { return nil }
        var transition = Transition(
            location: node.location, input: nil, guardCall: nil, guardElse: nil, match: nil, cases: [], otherwise: nil,
            effect: nil, call: nil, outcomes: [], to: nil)
        if let errorNode = node["error"] {
            if let message = template(errorNode, "error") {
                transition.to = .stay(error: message, errorNode.location)
            }
            if node["to"] != nil { error("a transition either stays with an error or goes somewhere, not both", errorNode.location) }
        }
        if let toNode = node["to"] { transition.to = target(toNode) }
        if let inputNode = node["input"] { transition.input = validation(inputNode) }
        if let guardNode = node["guard"] {
            switch guardNode {
            case .scalar:
                transition.guardCall = call(name: guardNode, with: nil, kind: "guard", at: guardNode.location)
            default:
                _ = pairs(guardNode, allowed: FlowLoader.Keys.guardCall, what: "guard")
                transition.guardCall = call(name: guardNode["name"], with: guardNode["with"], kind: "guard", at: guardNode.location)
            }
            if let elseNode = node["else"] { transition.guardElse = target(elseNode) }
        } else if let elseNode = node["else"] {
            error("'else' only applies with a guard", elseNode.location)
        }
        if let doNode = node["do"] {
            transition.effect = call(name: doNode, with: node["with"], kind: "effect", at: doNode.location)
        } else if let withNode = node["with"] {
            error("'with' gives arguments to 'do: <effect>' (for a guard, write guard: {name, with})", withNode.location)
        }
        if let callNode = node["call"] {
            transition.call = serviceCall(callNode)
            if node["do"] != nil { error("a transition either runs an effect (do) or calls a service (call), not both", callNode.location) }
        }
        if let outcomesNode = node["outcomes"] {
            if case .mapping(let pairs, _) = outcomesNode {
                for (key, value) in pairs {
                    if let target = target(value) { transition.outcomes.append((key.text, target, key.location)) }
                }
            } else {
                error("outcomes must map outcome names to targets", outcomesNode.location)
            }
            if node["do"] == nil, node["call"] == nil { error("outcomes need 'do: <effect>' or 'call: <service call>'", outcomesNode.location) }
        }
        if let matchNode = node["match"] {
            transition.match = template(matchNode, "match")
            if let casesNode = node["cases"], case .mapping(let pairs, _) = casesNode {
                for (key, value) in pairs {
                    if let sub = self.transition(value, what: "case '\(key.text)'", isState: false) {
                        transition.cases.append((key.text, sub))
                    }
                }
            } else {
                error("match needs cases: a mapping of values to transitions", matchNode.location)
            }
            if let otherwiseNode = node["otherwise"], let sub = self.transition(otherwiseNode, what: "otherwise", isState: false) {
                transition.otherwise = Box(sub)
            }
            if node["do"] != nil || node["call"] != nil || node["to"] != nil {
                error("a match chooses the next step itself; put do/to inside its cases", matchNode.location)
            }
        } else if let casesNode = node["cases"] {
            error("cases need match: \"{{…}}\"", casesNode.location)
        }
        if transition.to == nil, transition.effect == nil, transition.call == nil, transition.match == nil {
            error("\(what) goes nowhere: give it to: <state>, do: <effect> or call: <service call> with outcomes, or match", node.location)
        }
        return transition
    }

    /// `call: {service, method, path, query, body, timeout}`.
    mutating func serviceCall(_ node: SourceNode) -> ServiceCallSpec? {
        _ = pairs(node, allowed: FlowLoader.Keys.call, what: "call")
        guard case .mapping = node else {
            error("call must be a mapping: {service: <name>, method: GET, path: /…}", node.location)
            return nil
        }
        guard let service = text(node["service"], "call service") else {
            error("call needs 'service: <name from services.yaml>'", node.location)
            return nil
        }
        var method = "GET"
        if let methodNode = text(node["method"], "call method") {
            method = methodNode.text.uppercased()
            if !ServiceCallSpec.methods.contains(method) {
                error("call method must be one of \(ServiceCallSpec.methods.sorted().joined(separator: ", ")); found '\(methodNode.text)'", methodNode.location)
            }
        }
        guard let path = template(node["path"], "call path") else {
            if node["path"] == nil { error("call needs 'path: /…' (below the service's base URL)", node.location) }
            return nil
        }
        if case .literal(let first)? = path.segments.first, first.hasPrefix("/") {
        } else {
            error("call path must start with '/'", node["path"]?.location ?? node.location)
        }
        if path.segments.contains(where: { if case .literal(let text) = $0 { text.contains("?") || text.contains("#") || text.contains("..") } else { false } }) {
            error("call path must not hold '?', '#' or '..': give query parameters under 'query'", node["path"]?.location ?? node.location)
        }
        var query: [(name: String, value: TemplateString)] = []
        if let queryNode = node["query"] {
            if case .mapping(let pairs, _) = queryNode {
                for (key, value) in pairs {
                    if let template = template(value, "query '\(key.text)'") { query.append((key.text, template)) }
                }
            } else {
                error("call query must be a mapping of names to values", queryNode.location)
            }
        }
        var body: JSONTemplate?
        if let bodyNode = node["body"] {
            body = JSONTemplate.from(bodyNode, diagnostics: &diagnostics)
            if method == "GET" || method == "DELETE" { error("a \(method) call has no body", bodyNode.location) }
        }
        var timeout: Duration?
        if let timeoutNode = text(node["timeout"], "call timeout") {
            timeout = FlowLoader.callTimeout(timeoutNode.text)
            if timeout == nil { error("call timeout must look like 500ms or 2s (at most 30s)", timeoutNode.location) }
        }
        return ServiceCallSpec(
            service: service.text, method: method, path: path, query: query, body: body, timeout: timeout, location: service.location)
    }

    private mutating func target(_ node: SourceNode) -> Target? {
        switch node {
        case .scalar(let scalar):
            return .state(scalar.text, scalar.location)
        case .mapping:
            _ = pairs(node, allowed: ["to", "error"], what: "a target")
            if let message = template(node["error"], "error") { return .stay(error: message, node.location) }
            if let to = text(node["to"], "to") { return .state(to.text, to.location) }
            error("a target is a state name, {to: <state>} or {error: <message>}", node.location)
            return nil
        case .sequence:
            error("a target is a state name, {to: <state>} or {error: <message>}, not a list", node.location)
            return nil
        }
    }

    private mutating func validation(_ node: SourceNode) -> InputValidation? {
        _ = pairs(node, allowed: FlowLoader.Keys.validation, what: "input validation")
        guard case .mapping = node else { return nil }
        var validation = InputValidation.text
        validation.location = node.location
        if let acceptNode = node["accept"] {
            switch acceptNode {
            case .scalar(let scalar): validation.accept = [scalar.text]
            case .sequence(let items, _): validation.accept = items.compactMap { text($0, "accept")?.text }
            default: error("accept must be a list such as [barcode, text]", acceptNode.location)
            }
            for name in validation.accept where !["text", "barcode", "choice"].contains(name) {
                error("accept lists input members: text, barcode, choice; found '\(name)'", acceptNode.location)
            }
        }
        if let trim = bool(node["trim"], "trim") { validation.trim = trim }
        if let uppercase = bool(node["uppercase"], "uppercase") { validation.uppercase = uppercase }
        if let required = bool(node["required"], "required") { validation.required = required }
        validation.minLength = int(node["minLength"], "minLength")
        validation.maxLength = int(node["maxLength"], "maxLength", minimum: 1)
        validation.pattern = pattern(node["pattern"], "pattern")
        validation.patternMessage = template(node["patternMessage"], "patternMessage")
        return validation
    }
}

/// Finds the events a screen's command actions send: every mapping with
/// `type: command` and an `event`.
public enum ScreenEvents {
    public static func commandEvents(in template: JSONTemplate) -> [String] {
        var events: [String] = []
        func walk(_ node: JSONTemplate) {
            switch node {
            case .array(let items): items.forEach(walk)
            case .object(let pairs, _, _, _):
                let type = pairs.first { $0.0 == "type" }?.1
                let event = pairs.first { $0.0 == "event" }?.1
                if case .text(let typeText)? = type, typeText == .literal("command"), case .text(let eventText)? = event,
                    eventText.isLiteral
                {
                    let name = eventText.render(TemplateScope())
                    if !events.contains(name) { events.append(name) }
                }
                pairs.forEach { walk($0.1) }
            default: break
            }
        }
        walk(template)
        return events
    }
}

/// "Did you mean" for misspelt keys and names.
public enum Suggest {
    public static func closest(_ word: String, in candidates: some Collection<String>) -> String? {
        let scored = candidates.map { ($0, distance(word.lowercased(), $0.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= max(1, word.count / 3) else { return nil }
        return best.0
    }

    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}

/// Duration spellings of flow files, for tools that read related files (scenario stubs).
public enum FlowLoaderDurations {
    /// `250ms`, `2s` (at most 30 seconds).
    public static func callTimeout(_ text: String) -> Duration? { FlowLoader.callTimeout(text) }
}
