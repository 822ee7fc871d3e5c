import BatonContract
import BatonFlows
import BatonJSON
import Foundation
import Testing

enum ContractFixtures {
    static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("no package root")
    }()

    static let registry: ContractRegistry = {
        let (registry, diagnostics) = ContractLoader.load(directory: root.appendingPathComponent("Flows"))
        precondition(!diagnostics.hasErrors, "\(diagnostics)")
        return registry!
    }()

    static let fitter = ScreenFitter(registry: registry)

    static func client(_ version: Int, _ capabilities: Set<String> = []) -> ScreenFitter.Client {
        .init(contract: version, capabilities: capabilities)
    }

    static func screen(_ components: [JSONValue], header: JSONValue? = nil, buttons: [JSONValue] = []) -> JSONValue {
        var object: JSONObject = ["type": "componentScreen", "id": "s"]
        if let header { object["header"] = header }
        object["sections"] = [["id": "main", "components": .array(components)]]
        if !buttons.isEmpty { object["secondaryButtons"] = .array(buttons) }
        return .object(object)
    }

    static func components(_ screen: JSONValue) -> [JSONValue] {
        screen["sections"]?.arrayValue?.first?["components"]?.arrayValue ?? []
    }

    static let command: JSONValue = ["type": "command", "url": "/v3/command", "payload": "p"]
    static let start: JSONValue = ["type": "startFlow", "url": "/v3/command", "payload": "p"]
}

@Suite("Downgrade pass")
struct ScreenFitterTests {
    let fitter = ContractFixtures.fitter
    typealias F = ContractFixtures

    @Test("the shipped contract loads: versions 1–3, the required starting set")
    func contract() {
        let registry = F.registry
        #expect(registry.oldest == 1 && registry.newest == 3)
        let byVersion = Dictionary(grouping: registry.components.values, by: \.since).mapValues { Set($0.map(\.name)) }
        #expect(byVersion[1] == ["text", "detailRow", "button", "textField", "header", "list", "image", "spacer"])
        #expect(byVersion[2] == ["artworkRow", "artworkHeader", "carousel", "badge"])
        #expect(byVersion[3] == ["barcodeScanner", "richText"])
        let actions = Dictionary(grouping: registry.actions.values, by: \.since).mapValues { Set($0.map(\.name)) }
        #expect(actions[1] == ["command", "openUrl", "navigate", "close"])
        #expect(actions[2] == ["startFlow", "share"])
        #expect(actions[3] == ["scanBarcode"])
    }

    // A template that is one reference keeps the referenced value's type, so a service answering
    // {"status": {...}} put an object into a text component's `text`, and a count a number: a
    // client decoding the string the contract promises cannot read the screen.
    @Test("a string field holding a number, a truth value, an object or a list is written as its text; null, strings and typed fields stay as they are")
    func stringFieldsAreText() {
        let text: JSONValue = ["type": "text", "id": "t", "text": ["type": "button", "title": "x"]]
        let row: JSONValue = ["type": "detailRow", "id": "r", "title": 42, "subtitle": .null, "action": F.command]
        let flag: JSONValue = ["type": "text", "id": "f", "text": true]
        let list: JSONValue = ["type": "text", "id": "l", "text": ["a", 1.5]]
        let scanner: JSONValue = ["type": "barcodeScanner", "id": "b", "title": "Scan", "formats": ["qr"], "action": F.command]
        let fitted = fitter.fitScreen(F.screen([text, row, flag, list, scanner]), for: F.client(3, ["barcode_scanner"])).0
        #expect(
            F.components(fitted) == [
                ["type": "text", "id": "t", "text": #"{"type":"button","title":"x"}"#],
                ["type": "detailRow", "id": "r", "title": "42", "subtitle": .null, "action": F.command],
                ["type": "text", "id": "f", "text": "true"],
                ["type": "text", "id": "l", "text": #"["a",1.5]"#],
                scanner,
            ])
        // Through a contract fallback (artworkRow → detailRow for version 1), and in the header.
        let artwork: JSONValue = ["type": "artworkRow", "id": "a", "title": 7, "subtitle": "S", "artwork": "https://i/a.png", "action": F.command]
        let header: JSONValue = ["type": "header", "id": "h", "title": false]
        let v1 = fitter.fitScreen(F.screen([artwork], header: header), for: F.client(1)).0
        #expect(F.components(v1) == [["type": "detailRow", "id": "a", "title": "7", "subtitle": "S", "image": "https://i/a.png", "action": F.command]])
        #expect(v1["header"] == ["type": "header", "id": "h", "title": "false"])
    }

    @Test("null in a text field the contract requires (a service that answered without the member) is written as \"\"; an optional one stays null")
    func requiredTextIsNeverNull() {
        let text: JSONValue = ["type": "text", "id": "t", "text": .null, "style": .null]
        let row: JSONValue = ["type": "detailRow", "id": "r", "title": .null, "subtitle": .null, "action": F.command]
        let fitted = fitter.fitScreen(F.screen([text, row]), for: F.client(3)).0
        #expect(
            F.components(fitted) == [
                ["type": "text", "id": "t", "text": "", "style": .null],
                ["type": "detailRow", "id": "r", "title": "", "subtitle": .null, "action": F.command],
            ])
        // Through a contract fallback, and in the header.
        let artwork: JSONValue = ["type": "artworkRow", "id": "a", "title": .null, "subtitle": "S", "artwork": "https://i/a.png", "action": F.command]
        let header: JSONValue = ["type": "header", "id": "h", "title": .null]
        let v1 = fitter.fitScreen(F.screen([artwork], header: header), for: F.client(1)).0
        #expect(F.components(v1) == [["type": "detailRow", "id": "a", "title": "", "subtitle": "S", "image": "https://i/a.png", "action": F.command]])
        #expect(v1["header"] == ["type": "header", "id": "h", "title": ""])
    }

    @Test("artworkRow → detailRow for version 1, fields mapped, id kept; untouched for version 2")
    func artworkRow() {
        let row: JSONValue = ["type": "artworkRow", "id": "r", "title": "T", "subtitle": "S", "artwork": "https://i/a.png", "action": F.command]
        let (v1, report1) = fitter.fitScreen(F.screen([row]), for: F.client(1))
        #expect(F.components(v1) == [["type": "detailRow", "id": "r", "title": "T", "subtitle": "S", "image": "https://i/a.png", "action": F.command]])
        #expect(report1.fallbacks == [.init(component: "artworkRow", fallback: "detailRow"): 1])
        #expect(report1.rendered == 1)
        let (v2, report2) = fitter.fitScreen(F.screen([row]), for: F.client(2))
        #expect(F.components(v2) == [row])
        #expect(report2.totalFallbacks == 0)
    }

    @Test("artworkHeader → header for version 1")
    func artworkHeader() {
        let header: JSONValue = ["type": "artworkHeader", "id": "h", "title": "T", "subtitle": "S", "artwork": "https://i/a.png"]
        let (v1, report) = fitter.fitScreen(F.screen([["type": "text", "id": "t", "text": "x"]], header: header), for: F.client(1))
        #expect(v1["header"] == ["type": "header", "id": "h", "title": "T", "subtitle": "S"])
        #expect(report.fallbacks == [.init(component: "artworkHeader", fallback: "header"): 1])
    }

    @Test("carousel → list of rows for version 1: the children are fitted too (artworkRow → detailRow, badge omitted)")
    func carousel() {
        let carousel: JSONValue = [
            "type": "carousel", "id": "c", "title": "More",
            "items": [
                ["type": "artworkRow", "id": "a", "title": "A", "artwork": "https://i/a.png"],
                ["type": "badge", "id": "b", "text": "New"],
            ],
        ]
        let (v1, report) = fitter.fitScreen(F.screen([carousel]), for: F.client(1))
        #expect(F.components(v1) == [["type": "list", "id": "c", "title": "More", "components": [["type": "detailRow", "id": "a", "title": "A", "image": "https://i/a.png"]]]])
        #expect(report.fallbacks == [.init(component: "carousel", fallback: "list"): 1, .init(component: "artworkRow", fallback: "detailRow"): 1])
        #expect(report.omissions == [.init(component: "badge", reason: .version): 1])
        #expect(report.rendered == 2)
    }

    @Test("barcodeScanner needs the barcode_scanner capability: without it, a textField, even on version 3")
    func barcodeCapability() {
        let scanner: JSONValue = ["type": "barcodeScanner", "id": "scan", "title": "Scan", "prompt": "Code", "action": F.command]
        let (with, withReport) = fitter.fitScreen(F.screen([scanner]), for: F.client(3, ["barcode_scanner"]))
        #expect(F.components(with) == [scanner])
        #expect(withReport.totalFallbacks == 0)
        let (without, report) = fitter.fitScreen(F.screen([scanner]), for: F.client(3))
        #expect(F.components(without) == [["type": "textField", "id": "scan", "label": "Scan", "placeholder": "Code", "action": F.command, "keyboard": "ascii"]])
        #expect(report.fallbacks == [.init(component: "barcodeScanner", fallback: "textField"): 1])
        let (old, _) = fitter.fitScreen(F.screen([scanner]), for: F.client(1, ["barcode_scanner"]))
        #expect(F.components(old).first?["type"] == "textField")
    }

    @Test("richText → text for versions before 3")
    func richText() {
        let rich: JSONValue = ["type": "richText", "id": "r", "markdown": "**b**", "text": "b"]
        let (v2, report) = fitter.fitScreen(F.screen([rich]), for: F.client(2))
        #expect(F.components(v2) == [["type": "text", "id": "r", "text": "b"]])
        #expect(report.fallbacks.count == 1)
    }

    @Test("an inline fallback wins over the contract's; the output never carries a fallback member")
    func inlineFallback() {
        let scanner: JSONValue = [
            "type": "barcodeScanner", "id": "scan", "title": "Scan", "action": F.command,
            "fallback": ["type": "button", "title": "Type the code instead", "action": F.command],
        ]
        let (v1, report) = fitter.fitScreen(F.screen([scanner]), for: F.client(1))
        #expect(F.components(v1) == [["type": "button", "title": "Type the code instead", "action": F.command, "id": "scan"]])
        #expect(report.fallbacks == [.init(component: "barcodeScanner", fallback: "button"): 1])
        let (v3, _) = fitter.fitScreen(F.screen([scanner]), for: F.client(3, ["barcode_scanner"]))
        #expect(F.components(v3) == [["type": "barcodeScanner", "id": "scan", "title": "Scan", "action": F.command]])
    }

    @Test("omission rules: no fallback, unknown type, empty container, empty section")
    func omissions() {
        let (v1, report) = fitter.fitScreen(
            F.screen([
                ["type": "badge", "id": "b", "text": "x"],
                ["type": "hologram", "id": "h"],
                ["type": "list", "id": "l", "components": [["type": "badge", "id": "b2", "text": "y"]]],
                ["type": "text", "id": "t", "text": "kept"],
            ]), for: F.client(1))
        #expect(F.components(v1) == [["type": "text", "id": "t", "text": "kept"]])
        #expect(report.omissions == [
            .init(component: "badge", reason: .version): 2, .init(component: "unknown", reason: .unknownType): 1,
            .init(component: "list", reason: .empty): 1,
        ])
        let (empty, emptyReport) = fitter.fitScreen(F.screen([["type": "badge", "id": "b", "text": "x"]]), for: F.client(1))
        #expect(empty["sections"] == [])
        #expect(emptyReport.omissions[.init(component: "section", reason: .empty)] == 1)
    }

    @Test("a component whose action the client cannot perform is omitted; startFlow falls back to command")
    func actions() {
        let share: JSONValue = ["type": "button", "id": "s", "title": "Share", "action": ["type": "share", "text": "x"]]
        let start: JSONValue = ["type": "button", "id": "go", "title": "Go", "action": F.start]
        let unavailable: JSONValue = ["type": "button", "id": "u", "title": "U", "action": ["type": "unavailable"]]
        let (v2, report) = fitter.fitScreen(F.screen([share, start, unavailable]), for: F.client(2))
        #expect(F.components(v2) == [start])
        #expect(report.omissions == [.init(component: "button", reason: .action): 2])
        let (shared, _) = fitter.fitScreen(F.screen([share]), for: F.client(2, ["share_sheet"]))
        #expect(F.components(shared) == [share])
        let (v1, v1Report) = fitter.fitScreen(F.screen([start]), for: F.client(1))
        #expect(F.components(v1).first?["action"]?["type"] == "command")
        #expect(v1Report.fallbacks == [.init(component: "startFlow", fallback: "command"): 1])
    }

    @Test("menu items whose action cannot be performed are dropped")
    func menu() {
        let screen = F.screen([["type": "text", "id": "t", "text": "x"]], buttons: [
            ["title": "Share", "action": ["type": "share", "text": "x"]], ["title": "Favourite", "action": F.start],
        ])
        let (v1, report) = fitter.fitScreen(screen, for: F.client(1))
        #expect(v1["secondaryButtons"]?.arrayValue?.count == 1)
        #expect(v1["secondaryButtons"]?.arrayValue?.first?["action"]?["type"] == "command")
        #expect(report.omissions[.init(component: "menuItem", reason: .action)] == 1)
    }

    @Test("openUrl targets off the allowlist drop their component, counted as url_blocked")
    func blockedURL() {
        let fitter = ScreenFitter(registry: F.registry, isAllowedURL: { $0.hasPrefix("https://app.example.com/") })
        let good: JSONValue = ["type": "button", "id": "g", "title": "Help", "action": ["type": "openUrl", "url": "https://app.example.com/help"]]
        let bad: JSONValue = ["type": "button", "id": "b", "title": "Evil", "action": ["type": "openUrl", "url": "https://evil.example/"]]
        let (fitted, report) = fitter.fitScreen(F.screen([good, bad]), for: F.client(3))
        #expect(F.components(fitted) == [good])
        #expect(report.omissions == [.init(component: "button", reason: .urlBlocked): 1])
        #expect(report.blockedURLs == ["https://evil.example/"])
    }

    @Test("a whole command reply: the screen and its top-level actions are fitted")
    func reply() {
        let reply: JSONValue = [
            "type": "error", "message": "Expired", "retry": F.start,
        ]
        let (fitted, report) = fitter.fitReply(reply, for: F.client(1))
        #expect(fitted["retry"]?["type"] == "command")
        #expect(report.totalFallbacks == 1)
    }

    // The pass writes bytes as it walks; these pin the bytes themselves (an ETag is their hash).

    @Test("a replacement is written in a fixed member order: type, id, mapped fields by name, constants")
    func replacementBytes() {
        let row: JSONValue = ["type": "artworkRow", "subtitle": "S", "id": "r", "title": "T", "artwork": "https://i/a.png", "action": F.command]
        let (bytes, _) = fitter.encodeScreen(F.screen([row]), for: F.client(1))
        let expected = #"{"type":"componentScreen","id":"s","sections":[{"id":"main","components":[{"type":"detailRow","id":"r","#
            + #""action":{"type":"command","url":"/v3/command","payload":"p"},"image":"https://i/a.png","subtitle":"S","title":"T"}]}]}"#
        #expect(String(decoding: bytes, as: UTF8.self) == expected)
    }

    @Test("what the client renders as it is comes out byte for byte as it went in, members in their order")
    func keptBytes() {
        let components: [JSONValue] = [
            ["id": "t", "type": "text", "text": "Tab\there “quoted”"],
            ["type": "list", "id": "l", "components": [["type": "detailRow", "id": "d", "title": "Row", "action": F.command]]],
            ["type": "barcodeScanner", "id": "b", "title": "Scan", "action": F.command],
        ]
        let screen = F.screen(components, header: ["type": "artworkHeader", "id": "h", "title": "T", "artwork": "https://i/h.png"], buttons: [["title": "Share", "action": ["type": "share", "text": "x"]]])
        let (bytes, report) = fitter.encodeScreen(screen, for: F.client(3, ["barcode_scanner", "share_sheet"]))
        #expect(bytes == JSONEncoding.encode(screen))
        #expect(report.totalFallbacks == 0 && report.totalOmissions == 0 && report.rendered == 5)
    }

    @Test("a retyped action keeps its members in place; a dropped member leaves no stray comma")
    func retypedAndDroppedBytes() {
        let button: JSONValue = ["type": "button", "id": "b", "action": ["payload": "p", "type": "startFlow", "url": "/v1/command"], "title": "Go"]
        let badge: JSONValue = ["type": "badge", "id": "x", "text": "New"]
        let (bytes, _) = fitter.encodeScreen(F.screen([badge, button, badge]), for: F.client(1))
        let expected = #"{"type":"componentScreen","id":"s","sections":[{"id":"main","components":[{"type":"button","id":"b","#
            + #""action":{"payload":"p","type":"command","url":"/v1/command"},"title":"Go"}]}]}"#
        #expect(String(decoding: bytes, as: UTF8.self) == expected)
    }
}

@Suite("Downgrade pass, property-style")
struct ScreenFitterPropertyTests {
    typealias F = ContractFixtures

    /// A small deterministic generator so a failure can be replayed from its seed.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Random component trees over every contract type (plus unknown ones), random actions.
    struct TreeGenerator {
        var rng: SplitMix
        var nextID = 0
        let types = ContractFixtures.registry.components.keys.sorted() + ["mystery"]
        let actions: [JSONValue] = [
            ContractFixtures.command, ContractFixtures.start, ["type": "share", "text": "x"], ["type": "scanBarcode", "url": "/v3/command", "payload": "p"],
            ["type": "navigate", "screen": "home"], ["type": "unavailable"], ["type": "teleport"],
        ]

        mutating func component(depth: Int) -> JSONValue {
            nextID += 1
            let type = types[Int.random(in: 0..<types.count, using: &rng)]
            var object: JSONObject = ["type": .string(type), "id": .string("c\(nextID)")]
            if let spec = ContractFixtures.registry.components[type] {
                for (name, field) in spec.fields.sorted(by: { $0.key < $1.key }) {
                    switch field.type {
                    case .action where field.required || Bool.random(using: &rng):
                        object[name] = actions[Int.random(in: 0..<actions.count, using: &rng)]
                    case .components:
                        let count = depth > 2 ? 0 : Int.random(in: 0...3, using: &rng)
                        object[name] = .array((0..<count).map { _ in component(depth: depth + 1) })
                    case .string where field.required, .url where field.required:
                        object[name] = .string(field.values.first ?? "v")
                    default:
                        break
                    }
                }
            } else if depth <= 2, Bool.random(using: &rng) {
                object["components"] = .array([component(depth: depth + 1)])
            }
            // Inline fallbacks are leaves: an alternative for one slot, not more content.
            if Int.random(in: 0..<6, using: &rng) == 0 { object["fallback"] = component(depth: 3) }
            return .object(object)
        }
    }

    static func countComponents(_ value: JSONValue, registry: ContractRegistry) -> Int {
        guard case .object(let object) = value else { return 0 }
        var count = 1
        let spec = registry.components[object["type"]?.stringValue ?? ""]
        let fields = spec.map { $0.fields.filter { $0.value.type == .components }.map(\.key) } ?? ["components", "items"]
        for field in fields { for child in object[field]?.arrayValue ?? [] { count += countComponents(child, registry: registry) } }
        return count
    }

    static func walk(_ value: JSONValue, _ visit: (JSONObject) -> Void) {
        guard case .object(let object) = value else { return }
        if object["type"] != nil { visit(object) }
        for (_, member) in object {
            if case .array(let items) = member { items.forEach { walk($0, visit) } } else { walk(member, visit) }
        }
    }

    @Test("over 2000 random trees: no type outside contract N, no empty container, no fallback member, counts add up", arguments: 1...4)
    func randomTrees(batch: Int) {
        let registry = F.registry
        for seed in 0..<500 {
            var generator = TreeGenerator(rng: SplitMix(state: UInt64(batch * 100_000 + seed)))
            let components = (0..<Int.random(in: 1...8, using: &generator.rng)).map { _ in generator.component(depth: 0) }
            let version = Int.random(in: 1...3, using: &generator.rng)
            let capabilities: Set<String> = Bool.random(using: &generator.rng) ? ["barcode_scanner", "share_sheet"] : []
            let (fitted, report) = F.fitter.fitScreen(F.screen(components), for: F.client(version, capabilities))

            var rendered = 0
            for component in F.components(fitted) {
                Self.walk(component) { object in
                    guard let type = object["type"]?.stringValue, registry.components[type] != nil || registry.actions[type] == nil else { return }
                    if let spec = registry.components[type] {
                        rendered += 1
                        #expect(spec.since <= version, "seed \(seed): \(type) reached version \(version)")
                        #expect(spec.capabilities.allSatisfy(capabilities.contains), "seed \(seed): \(type) without its capability")
                        #expect(object["fallback"] == nil, "seed \(seed): a fallback member reached the client")
                        if let field = spec.childrenField {
                            let children = object[field]?.arrayValue ?? []
                            #expect(children.count > 0, "seed \(seed): empty \(type)")
                        }
                    } else if registry.actions[type] == nil {
                        Issue.record("seed \(seed): unknown type \(type) reached the client")
                    }
                }
                Self.walk(component) { object in
                    if let action = object["action"], let type = action["type"]?.stringValue {
                        let spec = registry.actions[type]
                        #expect(spec != nil && spec!.since <= version && spec!.capabilities.allSatisfy(capabilities.contains),
                            "seed \(seed): action \(type) reached version \(version)")
                    }
                }
            }
            #expect(report.rendered == rendered, "seed \(seed)")
            // Every input component either reaches the client (as itself or a fallback) or is
            // counted as omitted — nothing vanishes uncounted. (Inline fallbacks are
            // alternatives, not extra components.)
            let input = components.reduce(0) { $0 + Self.countComponents($1, registry: registry) }
            let omitted = report.omissions.filter { $0.key.component != "section" && $0.key.component != "menuItem" }.values.reduce(0, +)
            #expect(input == rendered + omitted, "seed \(seed): \(input) in, \(rendered) rendered, \(omitted) omitted")
            if input != rendered + omitted, ProcessInfo.processInfo.environment["FIT_DEBUG"] != nil {
                print("DEBUG v\(version) \(capabilities)\nIN \(JSONValue.array(components))\nOUT \(fitted)\nREPORT \(report.omissions) \(report.fallbacks)")
            }
        }
    }
}
