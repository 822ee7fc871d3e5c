import BatonJSON

/// A flow as authored in `Flows/<name>.yaml`: a state machine whose states each answer with
/// one response and whose events move it on.
public struct FlowDefinition: Sendable {
    /// Who may run the flow.
    public enum Audience: String, Sendable, CaseIterable {
        /// A signed-in user (bearer token).
        case user
        /// An anonymous device (`X-Device-Id`), such as an App Clip.
        case device
        /// Either: the user when a token is present, else the device.
        case any
    }

    public var name: String
    public var title: String?
    public var audience: Audience
    /// How long a session lives after its last command.
    public var ttl: Duration
    public var parameters: [ParameterSpec]
    public var start: String
    public var states: [String: FlowState]
    /// State names in file order (for graphs and docs).
    public var stateOrder: [String]
    /// The file it was loaded from, and where each named thing is.
    public var file: String
    public var location: SourceLocation
    /// The file's exact text (stored by content hash so running sessions keep their rules).
    public var source: String
    /// Lowercase hex SHA-256 of `source`.
    public var hash: String

    public func state(_ name: String) -> FlowState? { states[name] }
}

/// A parameter the flow is started with (`{{params.name}}`).
public struct ParameterSpec: Sendable {
    public var name: String
    public var required: Bool
    public var pattern: String?
    public var maxLength: Int
    public var location: SourceLocation
}

/// One state: what it answers with, what it loads first, and where its events lead.
public struct FlowState: Sendable {
    public var name: String
    public var location: SourceLocation
    /// Loaders run before the response is rendered; their results are `{{data.<name>}}`.
    public var loads: [LoaderCall]
    public var response: StateResponse
    /// Event handlers by event name.
    public var handlers: [String: Transition]
    public var handlerOrder: [String]
    /// The result a terminal state records for the session.
    public var result: SessionResult?

    /// Whether entering this state ends the session.
    public var isTerminal: Bool {
        switch response {
        case .done, .refresh: return true
        case .error(let error): return error.retry == nil
        case .input, .screen, .action: return false
        }
    }

    /// The result a terminal state records: explicit, else `completed` for done and
    /// `cancelled` for refresh or a final error.
    public var sessionResult: SessionResult {
        if let result { return result }
        if case .done = response { return .completed }
        return .cancelled
    }

    /// The events this state's response lets a client send.
    public var emittedEvents: [String] {
        switch response {
        case .input(let input): return input.cancelTitle == nil ? ["submit"] : ["submit", "cancel"]
        case .screen(let screen): return screen.events
        case .error(let error):
            if case .event(let event)? = error.retry { return [event] }
            return []
        case .done, .refresh, .action: return []
        }
    }
}

extension FlowDefinition {
    /// Every transition in the flow (state actions and event handlers, with the cases and
    /// otherwise branches inside them), with the state it belongs to.
    public var allTransitions: [(state: String, transition: Transition)] {
        var found: [(String, Transition)] = []
        func walk(_ transition: Transition, in state: String) {
            found.append((state, transition))
            for branch in transition.cases { walk(branch.transition, in: state) }
            if let otherwise = transition.otherwise { walk(otherwise.value, in: state) }
        }
        for name in stateOrder {
            guard let state = states[name] else { continue }
            if case .action(let transition) = state.response { walk(transition, in: name) }
            for event in state.handlerOrder { if let handler = state.handlers[event] { walk(handler, in: name) } }
        }
        return found
    }

    /// The effects a new session can run before it gives the user anything to answer: those
    /// of action states reachable from `start` without passing a state that answers.
    ///
    /// A flow opened by a deep link should have none: links are retried, prefetched and
    /// opened twice, and a change made before the user's first tap would be made each time.
    public var effectsBeforeFirstAnswer: [EffectCall] {
        var found: [EffectCall] = []
        var visited: Set<String> = []
        func visit(_ target: Target?) {
            guard let name = target?.stateName, visited.insert(name).inserted, let state = states[name],
                case .action(let transition) = state.response
            else { return }
            walk(transition)
        }
        func walk(_ transition: Transition) {
            if let effect = transition.effect { found.append(effect) }
            // A write to a service is a change too (reads are harmless).
            if let call = transition.call, call.isWrite {
                found.append(NamedCall(name: "\(call.method) \(call.service)", arguments: [], location: call.location))
            }
            visit(transition.guardElse)
            for branch in transition.cases { walk(branch.transition) }
            if let otherwise = transition.otherwise { walk(otherwise.value) }
            for outcome in transition.outcomes { visit(outcome.target) }
            visit(transition.to)
        }
        visit(.state(start, SourceLocation(file: "", line: 1, column: 1)))
        return found
    }
}

/// How a session ended.
public enum SessionResult: String, Sendable, CaseIterable {
    case completed, cancelled, expired
}

/// What a state answers with.
public enum StateResponse: Sendable {
    case input(InputSpec)
    case screen(ScreenSpec)
    case done(DoneSpec)
    case refresh
    case error(ErrorSpec)
    /// No answer of its own: runs its transition as soon as it is entered.
    case action(Transition)
}

/// An input request: text or a choice.
public struct InputSpec: Sendable {
    public enum Kind: String, Sendable { case text, choice }

    public var kind: Kind
    public var title: TemplateString
    public var message: TemplateString?
    public var placeholder: TemplateString?
    /// Prefilled text.
    public var value: TemplateString?
    public var validation: InputValidation
    /// Static options (choice).
    public var options: [ChoiceOption]
    /// Options from a loader (choice), placed before the static ones.
    public var optionsFrom: OptionsSource?
    public var multiple: Bool
    public var submitTitle: TemplateString
    /// nil when the input offers no cancel.
    public var cancelTitle: TemplateString?
}

/// A static choice option.
public struct ChoiceOption: Sendable {
    public var id: TemplateString
    public var title: TemplateString
    public var subtitle: TemplateString?
}

/// Options produced by a loader: one per element, `id`/`title` templated over `item`.
public struct OptionsSource: Sendable {
    public var loader: LoaderCall
    public var id: TemplateString
    public var title: TemplateString
    public var subtitle: TemplateString?
}

/// How submitted text is normalised and checked.
public struct InputValidation: Sendable {
    /// Which input members are accepted as the value, in order (`text`, `barcode`, `choice`).
    public var accept: [String]
    public var trim: Bool
    public var uppercase: Bool
    public var minLength: Int?
    public var maxLength: Int?
    public var pattern: String?
    public var patternMessage: TemplateString?
    public var required: Bool
    public var location: SourceLocation?

    public static let text = InputValidation(
        accept: ["text"], trim: true, uppercase: false, minLength: nil, maxLength: nil, pattern: nil, patternMessage: nil,
        required: true, location: nil)
}

/// A screen answer: a component tree (inline or from `Flows/screens/`).
public struct ScreenSpec: Sendable {
    public enum Presentation: String, Sendable, CaseIterable { case push, modal, replace }

    public var presentation: Presentation
    /// The name of a template in `Flows/screens/`, when the screen is not inline.
    public var templateName: String?
    /// Parameters for a named template (`{{params.*}}` inside it).
    public var templateParams: [(String, JSONTemplate)]
    /// The inline screen, when given.
    public var inline: JSONTemplate?
    /// Events that command actions in the screen send (filled in once the template is known).
    public var events: [String]
    public var location: SourceLocation
}

/// A done answer.
public struct DoneSpec: Sendable {
    public enum Refresh: Sendable, Equatable {
        case none
        case all
        case sections([String])
    }

    public var message: TemplateString?
    public var refresh: Refresh
}

/// An error answer.
public struct ErrorSpec: Sendable {
    public enum Retry: Sendable, Equatable {
        /// Start the flow again (a new session).
        case restart
        /// Send this event to the same session.
        case event(String)
    }

    public var message: TemplateString
    public var retry: Retry?
}

/// What an event does: validate input, check a guard, choose a branch, run an effect, and
/// land somewhere.
public struct Transition: Sendable {
    public var location: SourceLocation
    /// Validation of the command's input (screen events; input states validate in their spec).
    public var input: InputValidation?
    public var guardCall: GuardCall?
    /// Where to go when the guard says no (default: stay with a generic error).
    public var guardElse: Target?
    /// Branching on a value: `match: "{{input.choice}}"` with `cases`.
    public var match: TemplateString?
    public var cases: [(value: String, transition: Transition)]
    public var otherwise: Box<Transition>?
    public var effect: EffectCall?
    /// A backend service call (instead of an effect): the session waits for it outside any
    /// transaction, and its answer picks the outcome.
    public var call: ServiceCallSpec?
    /// Where each effect or call outcome leads.
    public var outcomes: [(outcome: String, target: Target, location: SourceLocation)]
    /// Where to go when there is no effect, or its outcome has no entry.
    public var to: Target?

    public static func goto(_ state: String, at location: SourceLocation) -> Transition {
        Transition(
            location: location, input: nil, guardCall: nil, guardElse: nil, match: nil, cases: [], otherwise: nil, effect: nil,
            call: nil, outcomes: [], to: .state(state, location))
    }
}

/// A reference-type box so a transition can nest another one.
public final class Box<Value: Sendable>: Sendable {
    public let value: Value
    public init(_ value: Value) { self.value = value }
}

/// Where a transition lands.
public enum Target: Sendable {
    /// Enter this state.
    case state(String, SourceLocation)
    /// Stay, and answer with the current state's response carrying this error message.
    case stay(error: TemplateString, SourceLocation)

    public var stateName: String? {
        if case .state(let name, _) = self { return name }
        return nil
    }
}

/// A call of a named Swift function (effect, guard or loader) with templated arguments.
public struct NamedCall: Sendable {
    public var name: String
    public var arguments: [(name: String, value: JSONTemplate, location: SourceLocation)]
    public var location: SourceLocation

    /// Arguments rendered against `scope`.
    public func renderArguments(_ scope: TemplateScope) -> JSONObject {
        var object = JSONObject()
        for argument in arguments { object[argument.name] = argument.value.render(scope) ?? .null }
        return object
    }
}

public typealias EffectCall = NamedCall
public typealias GuardCall = NamedCall

/// A loader call whose result is stored under `name` (`{{data.<name>}}`).
public struct LoaderCall: Sendable {
    public var name: String
    public var call: NamedCall
}
