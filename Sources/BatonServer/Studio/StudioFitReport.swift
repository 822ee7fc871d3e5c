import BatonContract
import BatonJSON

/// What the downgrade pass did to each component of one screen, for Baton Studio's marks:
/// "artworkRow → detailRow (contract 1)", "badge omitted: needs contract 2".
///
/// ``FitReport`` counts by type, for metrics; the studio needs the same decisions per component
/// id. They come from the same ``ScreenFitter``: the fitted screen says what reached the client,
/// and fitting each changed component on its own says which fallbacks and which omission
/// reason the pass applied to it.
public struct StudioFitReport: Sendable {
    /// One component (or section, or menu item) that did not reach the client as designed.
    public struct Mark: Sendable, Equatable {
        /// What happened to the component.
        public enum Status: String, Sendable { case replaced, omitted, actionReplaced }
        /// The component id (`section:<id>`, `menu:<title>` for sections and menu items).
        public var id: String
        /// The component's type as the screen designed it.
        public var type: String
        /// Replaced by a fallback, omitted, or kept with its action performed as a fallback.
        public var status: Status
        /// The type it became (replaced) or its action's new type (actionReplaced).
        public var replacement: String?
        /// An ``OmissionReason`` raw value, `version` or `capability` for replacements.
        public var reason: String
        /// The sentence the studio shows.
        public var note: String
        /// Where an omitted component of a section would have been: the section, and the
        /// shown component it would have followed (nil: first). Nil for nested components.
        public var placement: (section: String, after: String?)?

        public static func == (a: Mark, b: Mark) -> Bool {
            a.id == b.id && a.type == b.type && a.status == b.status && a.replacement == b.replacement && a.reason == b.reason
                && a.note == b.note && a.placement?.section == b.placement?.section && a.placement?.after == b.placement?.after
        }
    }

    /// In screen order: header, sections, then the menu.
    public var marks: [Mark]

    /// The marks as the studio's JSON.
    public var json: JSONValue {
        .array(
            marks.map { mark in
                var object: JSONObject = [
                    "id": .string(mark.id), "type": .string(mark.type), "status": .string(mark.status.rawValue),
                    "reason": .string(mark.reason), "note": .string(mark.note),
                ]
                if let replacement = mark.replacement { object["replacement"] = .string(replacement) }
                if let placement = mark.placement {
                    object["section"] = .string(placement.section)
                    object["after"] = placement.after.map { .string($0) } ?? .null
                }
                return .object(object)
            })
    }

    /// Compares `raw` (the screen before the pass) with `fitted` (after it) for `client`.
    public init(raw: JSONValue, fitted: JSONValue, fitter: ScreenFitter, client: ScreenFitter.Client) {
        let context = Context(registry: fitter.registry, fitter: fitter, client: client)
        var present: [String: Present] = [:]
        context.collect(fitted, into: &present)
        var marks: [Mark] = []
        if let header = raw["header"] { context.compare(header, present: present, gone: nil, marks: &marks) }
        let fittedSections = Set((fitted["sections"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue })
        for section in raw["sections"]?.arrayValue ?? [] {
            let id = section["id"]?.stringValue ?? ""
            let sectionGone = !fittedSections.contains(id)
            var lastShown: String?
            for component in section["components"]?.arrayValue ?? [] {
                context.compare(component, present: present, gone: nil, placement: (id, lastShown), marks: &marks)
                if let componentID = component["id"]?.stringValue, present[componentID] != nil { lastShown = componentID }
            }
            if sectionGone {
                marks.append(
                    Mark(
                        id: "section:\(id)", type: "section", status: .omitted, replacement: nil, reason: OmissionReason.empty.rawValue,
                        note: "section \(id) omitted: none of its components is shown"))
            }
        }
        let fittedButtons = (fitted["secondaryButtons"]?.arrayValue ?? []).map {
            ($0["title"]?.stringValue ?? "", $0["action"]?["type"]?.stringValue)
        }
        for button in raw["secondaryButtons"]?.arrayValue ?? [] {
            let title = button["title"]?.stringValue ?? ""
            let actionType = button["action"]?["type"]?.stringValue ?? "?"
            guard let match = fittedButtons.first(where: { $0.0 == title }) else {
                marks.append(
                    Mark(
                        id: "menu:\(title)", type: "menuItem", status: .omitted, replacement: nil, reason: OmissionReason.action.rawValue,
                        note: "menu item “\(title)” omitted: \(context.actionShortfall(actionType))"))
                continue
            }
            if let fittedType = match.1, fittedType != actionType {
                marks.append(
                    Mark(
                        id: "menu:\(title)", type: "menuItem", status: .actionReplaced, replacement: fittedType,
                        reason: context.actionReason(actionType),
                        note: "\(actionType) → \(fittedType) (\(context.actionCause(actionType)))"))
            }
        }
        self.marks = marks
    }

    /// A component that reached the client: its type and its actions' types by field.
    struct Present {
        var type: String
        var actions: [String: String]
    }

    struct Context {
        let registry: ContractRegistry
        let fitter: ScreenFitter
        let client: ScreenFitter.Client

        /// Every component of a fitted screen by id.
        func collect(_ screen: JSONValue, into present: inout [String: Present]) {
            if let header = screen["header"] { collectComponent(header, into: &present) }
            for section in screen["sections"]?.arrayValue ?? [] {
                for component in section["components"]?.arrayValue ?? [] { collectComponent(component, into: &present) }
            }
        }

        func collectComponent(_ component: JSONValue, into present: inout [String: Present]) {
            guard let type = component["type"]?.stringValue else { return }
            let spec = registry.components[type]
            var actions: [String: String] = [:]
            for (name, field) in spec?.fields ?? [:] where field.type == .action {
                if let actionType = component[name]?["type"]?.stringValue { actions[name] = actionType }
            }
            if let id = component["id"]?.stringValue { present[id] = Present(type: type, actions: actions) }
            forEachChild(component, type: type) { collectComponent($0, into: &present) }
        }

        func forEachChild(_ component: JSONValue, type: String, _ body: (JSONValue) -> Void) {
            guard let spec = registry.components[type] else {
                for field in ["components", "items"] { component[field]?.arrayValue?.forEach(body) }
                return
            }
            for (name, field) in spec.fields.sorted(by: { $0.key < $1.key }) {
                switch field.type {
                case .component: if let child = component[name] { body(child) }
                case .components: component[name]?.arrayValue?.forEach(body)
                default: break
                }
            }
        }

        /// Marks `component` (and what it holds) where the fitted screen differs. `gone` names
        /// an omitted ancestor.
        func compare(
            _ component: JSONValue, present: [String: Present], gone: String?, placement: (section: String, after: String?)? = nil,
            marks: inout [Mark]
        ) {
            let type = component["type"]?.stringValue ?? "unknown"
            let id = component["id"]?.stringValue ?? "?"
            var childrenGone = gone
            if let gone {
                marks.append(
                    Mark(
                        id: id, type: type, status: .omitted, replacement: nil, reason: OmissionReason.parentOmitted.rawValue,
                        note: "\(type) omitted: inside \(gone), which is not shown"))
            } else if let found = present[id] {
                if found.type != type {
                    let chain = replacementChain(component)
                    let last = chain.last ?? found.type
                    marks.append(
                        Mark(
                            id: id, type: type, status: .replaced, replacement: found.type, reason: componentReason(type),
                            note: ([type] + chain.dropLast() + [last]).joined(separator: " → ") + " (\(componentCause(type)))"))
                }
                for (field, fittedAction) in found.actions {
                    let original = component[field]?["type"]?.stringValue ?? fittedAction
                    if original != fittedAction {
                        marks.append(
                            Mark(
                                id: id, type: type, status: .actionReplaced, replacement: fittedAction, reason: actionReason(original),
                                note: "\(original) → \(fittedAction) (\(actionCause(original)))"))
                    }
                }
                if found.type != type, !keepsChildren(type) { childrenGone = "\(type) \(id)" }
            } else {
                let (reason, note) = omission(component, type: type)
                marks.append(Mark(id: id, type: type, status: .omitted, replacement: nil, reason: reason, note: note, placement: placement))
                childrenGone = "\(type) \(id)"
            }
            forEachChild(component, type: type) { child in
                compare(child, present: present, gone: childrenGone, marks: &marks)
            }
        }

        /// The types `component` went through, fitted on its own (its own fallbacks only).
        func replacementChain(_ component: JSONValue) -> [String] {
            let report = isolatedReport(component)
            var chain: [String] = []
            var current = component["type"]?.stringValue ?? "unknown"
            for _ in 0..<16 {
                guard let hit = report.hitCounts.first(where: { $0.hit.component == current })?.hit else { break }
                chain.append(hit.fallback)
                current = hit.fallback
            }
            return chain
        }

        /// Why the pass dropped `component`, from fitting it on its own.
        func omission(_ component: JSONValue, type: String) -> (reason: String, note: String) {
            let report = isolatedReport(component)
            let chain = [type] + replacementChain(component)
            let found = report.omissionCounts.map(\.omission).first { $0.reason != .parentOmitted && chain.contains($0.component) }
                ?? report.omissionCounts.map(\.omission).first { $0.reason != .parentOmitted && $0.component == "unknown" }
            guard let found else { return ("dropped", "\(type) omitted: dropped with the component that held it") }
            let via = chain.count > 1 ? " (as \(chain.joined(separator: " → ")))" : ""
            switch found.reason {
            case .version, .capability:
                return (found.reason.rawValue, "\(type) omitted\(via): \(componentShortfall(found.component))")
            case .action:
                let actions = (registry.components[found.component]?.fields ?? [:]).filter { $0.value.type == .action }.keys.sorted()
                let actionType = actions.compactMap { component[$0]?["type"]?.stringValue }.first ?? "?"
                return (found.reason.rawValue, "\(type) omitted\(via): its action \(actionType) — \(actionShortfall(actionType))")
            case .empty:
                return (found.reason.rawValue, "\(type) omitted\(via): nothing inside it is shown")
            case .urlBlocked:
                return (found.reason.rawValue, "\(type) omitted: its openUrl target is not on the outbound allowlist")
            case .unknownType:
                return (found.reason.rawValue, "\(type) omitted: not a type of the contract")
            case .parentOmitted:
                return (found.reason.rawValue, "\(type) omitted: inside a component that is not shown")
            }
        }

        func isolatedReport(_ component: JSONValue) -> FitReport {
            let screen: JSONValue = [
                "type": "componentScreen", "id": "studio", "sections": [["id": "studio", "components": [component]]],
            ]
            return fitter.fitScreen(screen, for: client).1
        }

        func keepsChildren(_ type: String) -> Bool {
            guard let spec = registry.components[type], let children = spec.childrenField else { return true }
            if case .component(_, let map, _) = spec.fallback { return map.values.contains(children) }
            return false
        }

        func componentReason(_ type: String) -> String {
            guard let spec = registry.components[type] else { return OmissionReason.unknownType.rawValue }
            return spec.since > client.contract ? OmissionReason.version.rawValue : OmissionReason.capability.rawValue
        }

        /// Why a type was replaced, in brackets after the arrow: "contract 1", "no barcode_scanner".
        func componentCause(_ type: String) -> String {
            guard let spec = registry.components[type] else { return "not in the contract" }
            return cause(since: spec.since, capabilities: spec.capabilities)
        }

        func actionCause(_ type: String) -> String {
            guard let spec = registry.actions[type] else { return "not in the contract" }
            return cause(since: spec.since, capabilities: spec.capabilities)
        }

        func cause(since: Int, capabilities: [String]) -> String {
            if since > client.contract { return "contract \(client.contract)" }
            let missing = capabilities.filter { !client.capabilities.contains($0) }
            return missing.isEmpty ? "contract \(client.contract)" : "no " + missing.joined(separator: ", ")
        }

        /// What a type needs that the client lacks: "needs contract 2", "needs barcode_scanner".
        func componentShortfall(_ type: String) -> String {
            guard let spec = registry.components[type] else { return "not in the contract" }
            return shortfall(since: spec.since, capabilities: spec.capabilities)
        }

        func actionReason(_ type: String) -> String {
            guard let spec = registry.actions[type] else { return OmissionReason.unknownType.rawValue }
            return spec.since > client.contract ? OmissionReason.version.rawValue : OmissionReason.capability.rawValue
        }

        func actionShortfall(_ type: String) -> String {
            guard let spec = registry.actions[type] else { return "\(type) is not in the contract" }
            return shortfall(since: spec.since, capabilities: spec.capabilities)
        }

        func shortfall(since: Int, capabilities: [String]) -> String {
            if since > client.contract { return "needs contract \(since)" }
            let missing = capabilities.filter { !client.capabilities.contains($0) }
            return missing.isEmpty ? "not performable here" : "needs " + missing.joined(separator: ", ")
        }
    }
}
