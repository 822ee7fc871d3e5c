import BatonJSON

/// A screen or reply drawn as plain text, with the actions a person can pick by key.
///
/// Only the contract's components are drawn specially; anything else shows as its type, so
/// an author sees at once what a real client would have received.
public struct ScreenText: Sendable {
    /// Something the person can pick: its key (`1`, `2`, … for components, `m1`, … for the
    /// menu), what it says, and the action behind it.
    public struct Choice: Sendable, Equatable {
        public var key: String
        public var label: String
        public var action: JSONValue
        /// What picking it asks for first: nothing, a line of text, or a barcode.
        public var asks: Ask

        public enum Ask: Sendable, Equatable {
            case nothing
            case text(prompt: String)
            case barcode(prompt: String)
        }
    }

    public private(set) var lines: [String] = []
    public private(set) var choices: [Choice] = []

    /// Draws a `componentScreen`.
    public init(screen: JSONValue) {
        let title = screen["title"]?.stringValue ?? screen["id"]?.stringValue ?? "Screen"
        lines.append("━━ \(title) ━━")
        if let header = screen["header"] { draw(header, indent: "") }
        for section in screen["sections"]?.arrayValue ?? [] {
            if let heading = section["heading"]?["title"]?.stringValue {
                lines.append("")
                lines.append("— \(heading) —")
            }
            for component in section["components"]?.arrayValue ?? [] { draw(component, indent: "  ") }
        }
        let menu = screen["secondaryButtons"]?.arrayValue ?? []
        if !menu.isEmpty {
            lines.append("")
            lines.append("Menu:")
            for (index, item) in menu.enumerated() {
                let key = "m\(index + 1)"
                let label = item["title"]?.stringValue ?? "…"
                lines.append("  \(key)) \(label)")
                if let action = item["action"] { choices.append(Choice(key: key, label: label, action: action, asks: .nothing)) }
            }
        }
    }

    private mutating func draw(_ component: JSONValue, indent: String) {
        let type = component["type"]?.stringValue ?? "?"
        let title = component["title"]?.stringValue
        let subtitle = component["subtitle"]?.stringValue
        let action = component["action"]
        switch type {
        case "header", "artworkHeader":
            if let title { lines.append("\(indent)\(title)") }
            if let subtitle { lines.append("\(indent)\(subtitle)") }
        case "text":
            lines.append("\(indent)\(component["text"]?.stringValue ?? "")")
        case "richText":
            lines.append("\(indent)\(component["text"]?.stringValue ?? component["markdown"]?.stringValue ?? "")")
        case "detailRow", "artworkRow":
            let text = [title, subtitle].compactMap { $0 }.joined(separator: " — ")
            row(text, action: action, indent: indent)
        case "button":
            row("[\(title ?? "…")]", action: action, indent: indent)
        case "textField":
            let label = component["label"]?.stringValue ?? "Text"
            let hint = component["placeholder"]?.stringValue.map { " (\($0))" } ?? ""
            row("✎ \(label)\(hint)", action: action, indent: indent, asks: .text(prompt: label))
        case "barcodeScanner":
            let prompt = component["prompt"]?.stringValue ?? title ?? "Barcode"
            row("⌗ \(title ?? "Scan") — \(prompt)", action: action, indent: indent, asks: .barcode(prompt: prompt))
        case "image":
            lines.append("\(indent)[image: \(component["alt"]?.stringValue ?? component["url"]?.stringValue ?? "")]")
        case "badge":
            lines.append("\(indent)(\(component["text"]?.stringValue ?? ""))")
        case "spacer":
            lines.append("")
        case "list", "carousel":
            if let title { lines.append("\(indent)\(title):") }
            for child in (component["components"] ?? component["items"])?.arrayValue ?? [] { draw(child, indent: indent + "  ") }
        default:
            lines.append("\(indent)[\(type)]")
        }
    }

    private mutating func row(_ text: String, action: JSONValue?, indent: String, asks: Choice.Ask = .nothing) {
        guard let action else {
            lines.append("\(indent)   \(text)")
            return
        }
        let key = String(choices.filter { !$0.key.hasPrefix("m") }.count + 1)
        lines.append("\(indent)\(key)) \(text)")
        choices.append(Choice(key: key, label: text, action: action, asks: asks))
    }
}
