import BatonJSON
import Foundation

/// Where a session stands between commands: its state and the values its templates see.
public struct FlowSessionState: Sendable, Equatable {
    /// The current state.
    public var state: String
    /// `params`, the last `input`, the last effect `result`, and bookkeeping (offered choices).
    public var context: JSONObject

    public init(state: String, context: JSONObject) {
        self.state = state
        self.context = context
    }
}

/// A command's input, as the client sent it (`{"text": …}`, `{"choice": …}`,
/// `{"choices": […]}` or `{"barcode": …}`).
public struct CommandInput: Sendable, Equatable {
    public var text: String?
    public var choice: String?
    public var choices: [String]?
    public var barcode: String?

    public init(text: String? = nil, choice: String? = nil, choices: [String]? = nil, barcode: String? = nil) {
        self.text = text
        self.choice = choice
        self.choices = choices
        self.barcode = barcode
    }

    public static let none = CommandInput()

    var jsonValue: JSONObject {
        var object = JSONObject()
        if let text { object["text"] = .string(text) }
        if let choice { object["choice"] = .string(choice) }
        if let choices { object["choices"] = .array(choices.map(JSONValue.string)) }
        if let barcode { object["barcode"] = .string(barcode) }
        return object
    }
}

/// What a state answers, before actions are signed and the screen is fitted to the client.
public enum FlowReply: Sendable, Equatable {
    case done(message: String?, refresh: DoneSpec.Refresh)
    case refresh
    case input(RenderedInput)
    /// A component screen; command actions carry `event`, start actions `flow` and `params`.
    case screen(presentation: ScreenSpec.Presentation, screen: JSONValue)
    case error(message: String, retry: ErrorSpec.Retry?)
}

/// An input request with every template filled in.
public struct RenderedInput: Sendable, Equatable {
    public var title: String
    public var message: String?
    public var error: String?
    public var kind: InputSpec.Kind
    public var placeholder: String?
    public var value: String?
    public var minLength: Int?
    public var maxLength: Int?
    public var options: [(id: String, title: String, subtitle: String?)]
    public var multiple: Bool
    public var submitTitle: String
    public var cancelTitle: String?

    public static func == (a: RenderedInput, b: RenderedInput) -> Bool {
        a.title == b.title && a.message == b.message && a.error == b.error && a.kind == b.kind
            && a.placeholder == b.placeholder && a.value == b.value && a.minLength == b.minLength
            && a.maxLength == b.maxLength && a.multiple == b.multiple && a.submitTitle == b.submitTitle
            && a.cancelTitle == b.cancelTitle && a.options.count == b.options.count
            && zip(a.options, b.options).allSatisfy { $0.id == $1.id && $0.title == $1.title && $0.subtitle == $1.subtitle }
    }
}

/// The result of one step: the session's next state, whether it ended, and the answer.
public struct FlowStep: Sendable {
    public var session: FlowSessionState
    /// Set when the session ended with this step.
    public var finished: SessionResult?
    public var reply: FlowReply
    /// The effects that ran, in order (for logs and tests).
    public var effects: [String]
    /// Set when the step stopped at a service call: ``reply`` is not an answer yet. The caller
    /// makes the call (outside any transaction) and continues with ``FlowEngine/resume(call:result:session:host:call:hops:)``.
    public var pending: PendingCall?

    public init(session: FlowSessionState, finished: SessionResult?, reply: FlowReply, effects: [String], pending: PendingCall? = nil) {
        self.session = session
        self.finished = finished
        self.reply = reply
        self.effects = effects
        self.pending = pending
    }
}

/// A service call a step stopped at, rendered and ready to send.
public struct PendingCall: Sendable, Equatable {
    /// The call's id in its definition (``ServiceCallSpec/id``).
    public var call: String
    public var request: ServiceRequest
    /// The action states this command had passed through when it stopped: ``FlowEngine/resume(call:result:session:host:call:hops:)``
    /// goes on counting from here, so a loop through a call is refused like any other.
    public var hops: Int

    public init(call: String, request: ServiceRequest, hops: Int) {
        self.call = call
        self.request = request
        self.hops = hops
    }
}

/// Problems that stop a command before any answer: bad parameters or input the client could
/// not legitimately send, or a flow that cannot go on (a definition bug the linter missed).
public struct FlowEngineError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable { case invalidParameters, invalidEvent, definition }
    public var kind: Kind
    public var message: String
    public var description: String { message }

    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }
}

/// The state machine. Given a flow, where a session stands, and an event with its input, it
/// decides the next state and renders its answer. Effects, guards and loaders run through
/// the ``FlowHost``; the engine itself touches nothing outside its arguments.
public struct FlowEngine: Sendable {
    /// What an engine is made of, shared by its copies. A command copies its engine out of the
    /// served table and into its run; as a struct of the flow's dozen strings, arrays and
    /// dictionaries, each copy cost a `swift_retain` per field (24 per command,
    /// `Benchmarks/e2e/counts.sh`), one for this box.
    @usableFromInline
    final class Parts: Sendable {
        @usableFromInline let flow: FlowDefinition
        @usableFromInline let screens: [String: ScreenTemplate]
        /// The transitions that make service calls, by call id: found once, when the engine is
        /// made, not on every resumed step.
        let callTransitions: [String: Transition]

        init(flow: FlowDefinition, screens: [String: ScreenTemplate], callTransitions: [String: Transition]) {
            self.flow = flow
            self.screens = screens
            self.callTransitions = callTransitions
        }
    }

    @usableFromInline let parts: Parts

    @inlinable public var flow: FlowDefinition { parts.flow }

    @inlinable public var screens: [String: ScreenTemplate] { parts.screens }

    var callTransitions: [String: Transition] { parts.callTransitions }

    /// How many action states one command may pass through (a loop guard).
    public static let maxHops = 32

    public init(flow: FlowDefinition, screens: [String: ScreenTemplate] = [:]) {
        var calls: [String: Transition] = [:]
        for (_, transition) in flow.allTransitions { if let call = transition.call { calls[call.id] = transition } }
        self.parts = Parts(flow: flow, screens: screens, callTransitions: calls)
    }

    /// Starts a session: checks the parameters, enters the start state, answers.
    public func start(parameters: JSONObject, host: some FlowHost, call: FlowCall) async throws -> FlowStep {
        if let problem = ParameterCheck.problem(parameters, specs: flow.parameters) {
            throw FlowEngineError(kind: .invalidParameters, message: "flow '\(flow.name)': \(problem)")
        }
        var run = Run(engine: self, host: host, call: call, context: ["params": .object(parameters)])
        return try await run.enter(flow.start, hops: 0)
    }

    /// Handles `event` for a session in `session`.
    public func handle(event: String, input: CommandInput, session: FlowSessionState, host: some FlowHost, call: FlowCall) async throws
        -> FlowStep
    {
        guard let state = flow.states[session.state] else {
            throw FlowEngineError(kind: .definition, message: "flow '\(flow.name)' has no state '\(session.state)'")
        }
        guard state.emittedEvents.contains(event) || state.handlers[event] != nil else {
            throw FlowEngineError(kind: .invalidEvent, message: "state '\(state.name)' does not accept event '\(event)'")
        }
        var run = Run(engine: self, host: host, call: call, context: session.context)
        run.context["error"] = nil
        return try await run.handle(event: event, input: input, in: state)
    }

    /// Continues a step that stopped at a service call, with the call's result: the first
    /// outcome matching it (`404`, then `4xx`; for failures their name, then `unavailable`)
    /// is followed. A status no outcome names counts as the failure `failed`. `session` is the
    /// session as the paused step left it.
    /// `hops` is the call's ``PendingCall/hops``: the action states the command had passed
    /// through before it stopped (the loop guard counts across calls).
    public func resume(
        call id: String, result: ServiceResult, session: FlowSessionState, host: some FlowHost, call: FlowCall, hops: Int
    ) async throws -> FlowStep {
        guard let state = flow.states[session.state], let transition = callTransitions[id] else {
            throw FlowEngineError(kind: .definition, message: "flow '\(flow.name)' has no service call \(id) in state '\(session.state)'")
        }
        var run = Run(engine: self, host: host, call: call, context: session.context)
        run.context["error"] = nil
        // The input the step validated before its call: what a later transition's rules read.
        run.submitted = session.context["input"]?.objectValue ?? [:]
        return try await run.resume(transition, result: result, from: state, hops: hops)
    }

    /// Renders the current state's answer again (after an expired payload was refreshed, or to
    /// show a state without an event).
    public func render(session: FlowSessionState, host: some FlowHost, call: FlowCall) async throws -> FlowStep {
        var run = Run(engine: self, host: host, call: call, context: session.context)
        guard let state = flow.states[session.state] else {
            throw FlowEngineError(kind: .definition, message: "flow '\(flow.name)' has no state '\(session.state)'")
        }
        return try await run.answer(state)
    }
}

/// The names a step's templates see, in `Run.scope`'s order.
private let stepScopeNames = ["params", "input", "inputs", "result", "error", "subject", "data"]
/// The names a screen's loaders see, in `ScreenRendering.load`'s order (`data` comes after them).
private let screenScopeNames = ["params", "subject", "error"]

/// One command's walk through the machine.
private struct Run<Host: FlowHost> {
    let engine: FlowEngine
    let host: Host
    let call: FlowCall
    var context: JSONObject
    var effects: [String] = []
    /// The command's input as the client sent it, for a transition's own validation (`follow`);
    /// an input state's submission, once that state validated it; after a service call, the
    /// input the step had validated before it. Never stored as it is.
    var submitted: JSONObject = [:]

    var flow: FlowDefinition { engine.flow }

    /// What the step's templates see. Made for each render, so made straight from its values:
    /// through a dictionary literal it cost a hash table, two arrays and a retain per value
    /// twice over (`Benchmarks/e2e/counts.sh`).
    var scope: TemplateScope {
        TemplateScope(
            names: stepScopeNames,
            roots: [
                context["params"] ?? [:], context["input"] ?? [:], context["inputs"] ?? [:], context["result"] ?? .null,
                context["error"] ?? .null, call.subject.jsonValue, context["data"] ?? [:],
            ])
    }

    mutating func handle(event: String, input: CommandInput, in state: FlowState) async throws -> FlowStep {
        // Only what the flow validates is kept, and templates see only that: an input state's
        // submission once the state validated it, a transition's input once it did (`follow`).
        // Any other member the client sent is dropped unread (cancel needs no input).
        submitted = input.jsonValue
        var validated = JSONObject()
        if case .input(let spec) = state.response, event == "submit" {
            switch validateInputState(spec, input) {
            case .failure(let problem):
                return try await stay(in: state, error: problem.message, typed: input.text ?? input.barcode)
            case .success(let value):
                validated = value
                submitted = value
            }
        }
        keep(validated, from: state)
        guard let transition = state.handlers[event] else {
            throw FlowEngineError(kind: .definition, message: "state '\(state.name)' has no handler for '\(event)'")
        }
        return try await follow(transition, from: state, hops: 0, typed: input.text ?? input.barcode)
    }

    /// Stores a step's validated input as `input`, and as the state's last accepted input, readable
    /// later as {{inputs.<state>.…}}.
    mutating func keep(_ validated: JSONObject, from state: FlowState) {
        context["input"] = .object(validated)
        var inputs = context["inputs"]?.objectValue ?? [:]
        inputs[state.name] = .object(validated)
        context["inputs"] = .object(inputs)
    }

    /// Applies a transition: validation, guard, match, effect, target.
    mutating func follow(_ transition: Transition, from state: FlowState, hops: Int, typed: String?) async throws -> FlowStep {
        if let validation = transition.input {
            switch InputCheck.validate(validation, input: submitted, scope: scope) {
            case .failure(let problem): return try await stay(in: state, error: problem.message, typed: typed)
            case .success(let value):
                // The member the rules took, and `value`, both as validated.
                var validated = context["input"]?.objectValue ?? [:]
                if let member = validation.accept.first(where: { submitted[$0]?.stringValue != nil }) {
                    validated[member] = .string(value)
                }
                validated["value"] = .string(value)
                keep(validated, from: state)
            }
        }
        if let guardCall = transition.guardCall {
            let allowed = try await host.runGuard(guardCall.name, arguments: guardCall.renderArguments(scope), call: call)
            if !allowed {
                return try await land(transition.guardElse ?? .stay(error: .literal("This action isn't available."), transition.location),
                    from: state, hops: hops, typed: typed)
            }
        }
        if let match = transition.match {
            let value = match.render(scope)
            if let chosen = transition.cases.first(where: { $0.value == value })?.transition {
                return try await follow(chosen, from: state, hops: hops, typed: typed)
            }
            if let otherwise = transition.otherwise {
                return try await follow(otherwise.value, from: state, hops: hops, typed: typed)
            }
            return try await stay(in: state, error: "That choice isn't available.", typed: typed)
        }
        if let serviceCall = transition.call {
            // Stop here: the call runs outside the transaction, then `resume` goes on.
            let request = serviceCall.render(scope)
            return FlowStep(
                session: FlowSessionState(state: state.name, context: context.filter { $0.key != "data" }), finished: nil,
                reply: .refresh, effects: effects, pending: PendingCall(call: serviceCall.id, request: request, hops: hops))
        }
        if let effect = transition.effect {
            let result = try await host.runEffect(effect.name, arguments: effect.renderArguments(scope), call: call)
            effects.append(effect.name)
            context["result"] = result.data
            if let target = transition.outcomes.first(where: { $0.outcome == result.outcome })?.target ?? transition.to {
                return try await land(target, from: state, hops: hops, typed: typed)
            }
            throw FlowEngineError(
                kind: .definition,
                message: "flow '\(flow.name)': effect '\(effect.name)' returned outcome '\(result.outcome)', which no transition handles")
        }
        guard let target = transition.to else {
            throw FlowEngineError(kind: .definition, message: "flow '\(flow.name)': a transition of '\(state.name)' goes nowhere")
        }
        return try await land(target, from: state, hops: hops, typed: typed)
    }

    /// Follows a service call's outcome.
    mutating func resume(_ transition: Transition, result: ServiceResult, from state: FlowState, hops: Int) async throws -> FlowStep {
        func target(for result: ServiceResult) -> Target? {
            for key in result.outcomeKeys {
                if let found = transition.outcomes.first(where: { $0.outcome == key }) { return found.target }
            }
            return nil
        }
        var result = result
        var chosen = target(for: result)
        if chosen == nil, case .response = result {
            result = .failure(.failed)
            chosen = target(for: result)
        }
        context["result"] = result.resultValue
        effects.append("call:\(transition.call?.service ?? "?")")
        guard let chosen = chosen ?? transition.to else {
            throw FlowEngineError(
                kind: .definition,
                message: "flow '\(flow.name)': service call outcome '\(result.outcomeKeys.first ?? "?")' is handled by no transition")
        }
        return try await land(chosen, from: state, hops: hops, typed: nil)
    }

    mutating func land(_ target: Target, from state: FlowState, hops: Int, typed: String?) async throws -> FlowStep {
        switch target {
        case .state(let name, _):
            return try await enter(name, hops: hops + 1)
        case .stay(let message, _):
            return try await stay(in: state, error: message.render(scope), typed: typed)
        }
    }

    /// Enters a state: action states run straight on; others answer.
    mutating func enter(_ name: String, hops: Int) async throws -> FlowStep {
        guard hops <= FlowEngine.maxHops else {
            throw FlowEngineError(kind: .definition, message: "flow '\(flow.name)' passed through more than \(FlowEngine.maxHops) action states in one step (a loop?)")
        }
        guard let state = flow.states[name] else {
            throw FlowEngineError(kind: .definition, message: "flow '\(flow.name)' has no state '\(name)'")
        }
        context["error"] = nil
        if case .action(let transition) = state.response {
            return try await follow(transition, from: state, hops: hops, typed: nil)
        }
        return try await answer(state)
    }

    /// Stays in `state` and answers again with an error message.
    mutating func stay(in state: FlowState, error: String, typed: String?) async throws -> FlowStep {
        context["error"] = .string(error)
        var step = try await answer(state)
        if case .input(var input) = step.reply {
            input.error = error
            if let typed, input.kind == .text { input.value = typed }
            step.reply = .input(input)
        }
        return step
    }

    /// Renders a state's answer.
    mutating func answer(_ state: FlowState) async throws -> FlowStep {
        var data = JSONObject()
        for load in state.loads {
            data[load.name] = try await host.runLoader(load.call.name, arguments: load.call.renderArguments(scope), call: call)
        }
        context["data"] = .object(data)
        defer { context["data"] = nil }
        let scope = self.scope
        let reply: FlowReply
        switch state.response {
        case .input(let spec):
            var options: [(id: String, title: String, subtitle: String?)] = []
            if let source = spec.optionsFrom {
                let items = try await host.runLoader(
                    source.loader.call.name, arguments: source.loader.call.renderArguments(scope), call: call)
                for item in items.arrayValue ?? [] {
                    let itemScope = scope.with("item", item)
                    options.append((source.id.render(itemScope), source.title.render(itemScope), source.subtitle?.render(itemScope)))
                }
            }
            for option in spec.options {
                options.append((option.id.render(scope), option.title.render(scope), option.subtitle?.render(scope)))
            }
            if spec.kind == .choice { context["offered"] = .array(options.map { .string($0.id) }) }
            reply = .input(
                RenderedInput(
                    title: spec.title.render(scope), message: spec.message?.render(scope).nilIfEmpty,
                    error: context["error"]?.stringValue, kind: spec.kind, placeholder: spec.placeholder?.render(scope),
                    value: spec.value?.render(scope), minLength: spec.validation.minLength,
                    maxLength: spec.validation.maxLength, options: options, multiple: spec.multiple,
                    submitTitle: spec.submitTitle.render(scope), cancelTitle: spec.cancelTitle?.render(scope)))
        case .screen(let spec):
            reply = .screen(presentation: spec.presentation, screen: try await renderScreen(spec, scope: scope))
        case .done(let spec):
            reply = .done(message: spec.message?.render(scope).nilIfEmpty, refresh: spec.refresh)
        case .refresh:
            reply = .refresh
        case .error(let spec):
            reply = .error(message: spec.message.render(scope), retry: spec.retry)
        case .action:
            throw FlowEngineError(kind: .definition, message: "action state '\(state.name)' has no answer")
        }
        let persisted = context.filter { $0.key != "data" }
        return FlowStep(
            session: FlowSessionState(state: state.name, context: persisted),
            finished: state.isTerminal ? state.sessionResult : nil, reply: reply, effects: effects)
    }

    func renderScreen(_ spec: ScreenSpec, scope: TemplateScope) async throws -> JSONValue {
        if let inline = spec.inline {
            return ScreenRendering.finish(inline.render(scope) ?? [:])
        }
        guard let name = spec.templateName, let template = engine.screens[name] else {
            throw FlowEngineError(kind: .definition, message: "screen template '\(spec.templateName ?? "?")' is not loaded")
        }
        var parameters = JSONObject()
        for (key, value) in spec.templateParams { parameters[key] = value.render(scope) ?? .null }
        return try await ScreenRendering.render(template, parameters: parameters, host: host, call: call, error: context["error"])
    }

    /// An input state's submission, validated: only the members the state's kind reads, as it
    /// checked them, and `value`.
    func validateInputState(_ spec: InputSpec, _ input: CommandInput) -> Result<JSONObject, InputProblem> {
        var value = JSONObject()
        switch spec.kind {
        case .text:
            switch InputCheck.validate(spec.validation, input: input.jsonValue, scope: scope) {
            case .failure(let problem): return .failure(problem)
            case .success(let text):
                value["text"] = .string(text)
                value["value"] = .string(text)
            }
        case .choice:
            let offered = Set((context["offered"]?.arrayValue ?? []).compactMap(\.stringValue))
            if spec.multiple {
                guard let choices = input.choices ?? input.choice.map({ [$0] }), !choices.isEmpty else {
                    return .failure(InputProblem(message: "Choose at least one option."))
                }
                guard choices.allSatisfy(offered.contains), Set(choices).count == choices.count else {
                    return .failure(InputProblem(message: "That choice isn't available any more."))
                }
                value["choices"] = .array(choices.map(JSONValue.string))
                value["value"] = .array(choices.map(JSONValue.string))
            } else {
                guard let choice = input.choice else { return .failure(InputProblem(message: "Choose an option.")) }
                guard offered.contains(choice) else { return .failure(InputProblem(message: "That choice isn't available any more.")) }
                value["choice"] = .string(choice)
                value["value"] = .string(choice)
            }
        }
        return .success(value)
    }
}

/// Why input was refused (the message is shown to the user).
public struct InputProblem: Error, Sendable {
    public var message: String
}

extension Result where Failure == InputProblem {
    fileprivate static func failure(_ message: String) -> Result { .failure(InputProblem(message: message)) }
}

/// Text normalisation and checks shared by input states and screen events.
public enum InputCheck {
    /// Default upper bound when a text input sets none: keeps rows and responses sane.
    public static let defaultMaxLength = 1000
    /// Code points allowed per counted character (combining marks, emoji sequences).
    public static let maxCodePointsPerCharacter = 4

    /// The message for text carrying an invisible or text-direction control character.
    public static let invisibleCharacterMessage =
        "Invisible characters and text-direction controls (such as zero-width spaces or right-to-left marks) aren't allowed here."

    /// Zero-width and directional formatting characters (U+200B–U+200F, U+202A–U+202E,
    /// U+2060–U+2069, U+FEFF, the Arabic letter mark U+061C), the line and paragraph separators
    /// that are not C0 controls (U+0085, U+2028, U+2029), and the other characters that show
    /// nothing: the soft hyphen (U+00AD), the combining grapheme joiner (U+034F), the Mongolian
    /// vowel separator (U+180E), the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0), the
    /// deprecated format characters (U+206A–U+206F), the interlinear annotation marks
    /// (U+FFF9–U+FFFB) and the tag characters (U+E0001, U+E0020–U+E007F). Variation selectors
    /// are not among them: they choose how a visible character looks (❤️, a name's ideograph).
    public static func isInvisibleOrBidiControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x200B...0x200F, 0x202A...0x202E, 0x2060...0x2069, 0xFEFF, 0x061C, 0x0085, 0x2028, 0x2029: true
        case 0x00AD, 0x034F, 0x180E, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x206A...0x206F, 0xFFF9...0xFFFB: true
        case 0xE0001, 0xE0020...0xE007F: true
        default: false
        }
    }

    /// Whether the text holds one of those characters. The exceptions are a zero-width joiner
    /// inside an emoji sequence (👩‍💻, 👨‍👩‍👧) and the tags of a subdivision's flag: there they are
    /// part of one visible picture, not hidden text.
    public static func containsInvisibleOrBidiControl(_ text: String) -> Bool {
        for character in text {
            let scalars = Array(character.unicodeScalars)
            for (index, scalar) in scalars.enumerated() where isInvisibleOrBidiControl(scalar) {
                let joinsEmoji =
                    scalar.value == 0x200D && index > 0 && index + 1 < scalars.count
                    && isEmojiSequencePart(scalars[index - 1]) && isPictograph(scalars[index + 1])
                // A subdivision's flag: U+1F3F4, tag letters, the cancel tag (🏴󠁧󠁢󠁳󠁣󠁴󠁿).
                let spellsFlag = (0xE0020...0xE007F).contains(scalar.value) && index > 0 && scalars[0].value == 0x1F3F4
                if !joinsEmoji, !spellsFlag { return true }
            }
        }
        return false
    }

    /// What may stand before a joiner in an emoji sequence: a pictograph (skin-tone modifiers
    /// included) or the emoji variation selector.
    private static func isEmojiSequencePart(_ scalar: Unicode.Scalar) -> Bool {
        isPictograph(scalar) || scalar.value == 0xFE0F
    }

    /// An emoji outside ASCII (the stdlib does not expose Extended_Pictographic; `isEmoji` alone
    /// is also true for the digits, `#` and `*`, which only become emoji with a keycap).
    private static func isPictograph(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value > 0x7F && scalar.properties.isEmoji
    }

    /// Picks the first accepted member of the input, normalises it and checks it. Returns
    /// the normalised value or a message for the user.
    public static func validate(_ rules: InputValidation, input: JSONObject, scope: TemplateScope) -> Result<String, InputProblem> {
        var raw: String?
        for member in rules.accept {
            if let text = input[member]?.stringValue {
                raw = text
                break
            }
        }
        guard var text = raw else {
            if rules.required { return .failure(InputProblem(message: "Please enter a value.")) }
            return .success("")
        }
        if rules.trim { text = text.trimmingCharacters(in: .whitespacesAndNewlines) }
        if rules.uppercase { text = text.uppercased() }
        // One spelling per text: canonically equivalent input ("é" as one code point or as "e" and
        // an accent) is stored alike, and the code-point bound below holds for what is stored (NFC
        // expands a few characters, such as U+0958, into two code points).
        text = text.precomposedStringWithCanonicalMapping
        if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return .failure(InputProblem(message: "Line breaks, tabs and other control characters aren't allowed here."))
        }
        // Invisible and text-direction characters make two names look alike or show text in
        // an order other than the stored one (a right-to-left override turns "exe.txt" into
        // "txt.exe"); nobody types them on purpose in a name or a note.
        if containsInvisibleOrBidiControl(text) {
            return .failure(InputProblem(message: invisibleCharacterMessage))
        }
        let length = text.count
        if rules.required, length == 0 {
            return .failure(InputProblem(message: "Please enter a value."))
        }
        if let minimum = rules.minLength, length < minimum {
            return .failure(InputProblem(message: minimum == 1 ? "Please enter a value." : "Use at least \(minimum) characters."))
        }
        let maximum = rules.maxLength ?? defaultMaxLength
        if length > maximum {
            return .failure(InputProblem(message: "Use at most \(maximum) characters (this has \(length))."))
        }
        // Characters are counted as people see them; a few of them can hide hundreds of
        // combining marks. Bound the code points too, so storage limits are never surprised.
        if text.unicodeScalars.count > maximum * maxCodePointsPerCharacter {
            return .failure(InputProblem(message: "That is too long: it has too many accents or combining marks."))
        }
        if let pattern = rules.pattern, !PatternCache.wholeMatch(pattern, text) {
            let message = rules.patternMessage?.render(scope.with("input", .object(["value": .string(text)])))
            return .failure(InputProblem(message: message?.nilIfEmpty ?? "That doesn't look right."))
        }
        return .success(text)
    }
}

/// Rendering of screen templates (shared by flows and `GET /v{N}/screens`).
public enum ScreenRendering {
    /// Renders a template with parameters: checks them, runs its loaders, fills the tree.
    /// - Parameter fetched: the results of the template's service loads, fetched beforehand
    ///   (outside any transaction); a service load missing here renders its fallback.
    public static func render(
        _ template: ScreenTemplate, parameters: JSONObject, host: some FlowHost, call: FlowCall, error: JSONValue? = nil,
        fetched: [String: ServiceResult] = [:]
    ) async throws -> JSONValue {
        render(template, scope: try await load(template, parameters: parameters, host: host, call: call, error: error, fetched: fetched))
    }

    /// What a template's content is rendered from: its parameters, the subject, and its loads'
    /// data (the loaders run on `host`, in order; service loads were fetched before). The part of
    /// `render` that needs the database, so a caller can end its transaction before rendering.
    public static func load(
        _ template: ScreenTemplate, parameters: JSONObject, host: some FlowHost, call: FlowCall, error: JSONValue? = nil,
        fetched: [String: ServiceResult] = [:]
    ) async throws -> TemplateScope {
        if let problem = ParameterCheck.problem(parameters, specs: template.parameters) {
            throw FlowEngineError(kind: .invalidParameters, message: "screen '\(template.name)': \(problem)")
        }
        var scope = TemplateScope(names: screenScopeNames, roots: [.object(parameters), call.subject.jsonValue, error ?? .null])
        var data = JSONObject()
        for load in template.serviceLoads {
            data[load.name] = load.value(for: fetched[load.name] ?? .failure(.failed), scope: scope)
        }
        for load in template.loads {
            data[load.name] = try await host.runLoader(load.call.name, arguments: load.call.renderArguments(scope), call: call)
        }
        scope.set("data", .object(data))
        return scope
    }

    /// The template's content rendered from `scope` (what ``load(_:parameters:host:call:error:fetched:)`` gave).
    public static func render(_ template: ScreenTemplate, scope: TemplateScope) -> JSONValue {
        finish(template.content.render(scope) ?? [:])
    }

    /// The requests of a template's service loads for these parameters (their templates see
    /// `params` and `subject` only).
    public static func serviceRequests(_ template: ScreenTemplate, parameters: JSONObject, subject: FlowSubject) -> [(String, ServiceRequest)] {
        let scope = TemplateScope(["params": .object(parameters), "subject": subject.jsonValue])
        return template.serviceLoads.map { load in
            var request = load.call.render(scope)
            request.timeout = load.call.timeout ?? ServiceLoad.defaultTimeout
            request.attempts = 1
            return (load.name, request)
        }
    }

    /// Marks the rendered tree as a `componentScreen`.
    static func finish(_ content: JSONValue) -> JSONValue {
        guard case .object(let object) = content else { return content }
        var screen: JSONObject = ["type": "componentScreen"]
        for (key, value) in object where key != "type" { screen[key] = value }
        return .object(screen)
    }
}

extension String {
    var nilIfEmpty: String? { isEmpty ? nil : self }
}
