import BatonContract
import BatonJSON
import Foundation

// What the in-process benchmarks and the instruction-count loop share: the contract and the
// 200-component screen of docs/benchmarks.md, "Downgrade pass".

/// The repository root, from this file's location.
public let repository: URL = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<4 { url.deleteLastPathComponent() }
    return url
}()

public let contract: ContractRegistry = {
    let (registry, diagnostics) = ContractLoader.load(directory: repository.appendingPathComponent("Flows"))
    precondition(!diagnostics.hasErrors, "\(diagnostics)")
    return registry!
}()

/// A 200-component screen mixing every version: 10 sections of 20 components each.
public func largeScreen() -> JSONValue {
    let command: JSONValue = ["type": "command", "url": "/v3/command", "payload": .string(String(repeating: "p", count: 180))]
    let start: JSONValue = ["type": "startFlow", "url": "/v3/command", "payload": .string(String(repeating: "s", count: 220))]
    var sections: [JSONValue] = []
    var id = 0
    func next() -> JSONValue { id += 1; return .string("c\(id)") }
    for section in 0..<10 {
        var components: [JSONValue] = []
        for index in 0..<20 {
            switch index % 10 {
            case 0: components.append(["type": "artworkRow", "id": next(), "title": .string("Track \(index)"), "subtitle": "Artist — Album", "artwork": .string("https://img.example/a\(index).jpg"), "action": start])
            case 1: components.append(["type": "detailRow", "id": next(), "title": .string("Row \(index)"), "subtitle": "Subtitle", "action": command])
            case 2: components.append(["type": "text", "id": next(), "text": "Some “quoted” text with unicode ✓ and an escape \\ in it"])
            case 3: components.append(["type": "badge", "id": next(), "text": "New"])
            case 4: components.append(["type": "richText", "id": next(), "markdown": "**Bold** and _italic_", "text": "Bold and italic"])
            case 5: components.append(["type": "button", "id": next(), "title": "Share", "action": ["type": "share", "text": "Listen to this"]])
            case 6: components.append(["type": "barcodeScanner", "id": next(), "title": "Scan", "prompt": "Label", "action": command])
            case 7: components.append(["type": "image", "id": next(), "url": .string("https://img.example/i\(index).jpg"), "alt": "Cover"])
            case 8: components.append(["type": "button", "id": next(), "title": "Open", "action": start])
            default: components.append(["type": "spacer", "id": next(), "size": "small"])
            }
        }
        sections.append(["id": .string("section-\(section)"), "heading": ["title": .string("Section \(section)")], "components": .array(components)])
    }
    return [
        "type": "componentScreen", "id": "large", "title": "A large screen",
        "header": ["type": "artworkHeader", "id": "header", "title": "Header", "artwork": "https://img.example/h.jpg"],
        "sections": .array(sections),
        "secondaryButtons": [["title": "Add to favourites", "action": start], ["title": "Share", "action": ["type": "share", "text": "x"]]],
    ]
}
