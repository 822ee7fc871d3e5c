import BatonContract
import BatonFlows
import BatonJSON
import BatonRuntime
import Benchmark
import Foundation

/// The repository root, from this file's location.
let repository: URL = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<4 { url.deleteLastPathComponent() }
    return url
}()

let contract: ContractRegistry = {
    let (registry, diagnostics) = ContractLoader.load(directory: repository.appendingPathComponent("Flows"))
    precondition(!diagnostics.hasErrors, "\(diagnostics)")
    return registry!
}()

/// A 200-component screen mixing every version: 10 sections of 20 components each.
func largeScreen() -> JSONValue {
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

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .mallocCountTotal, .throughput], timeUnits: .microseconds, maxDuration: .seconds(5))
    let screen = largeScreen()
    let fitter = ScreenFitter(registry: contract, isAllowedURL: { $0.hasPrefix("https://") })

    Benchmark("Fit + encode a 200-component screen, contract 1 (many fallbacks)") { benchmark in
        let client = ScreenFitter.Client(contract: 1, capabilities: [])
        for _ in benchmark.scaledIterations {
            blackHole(fitter.encodeScreen(screen, for: client))
        }
    }

    Benchmark("Fit + encode a 200-component screen, contract 3 with capabilities") { benchmark in
        let client = ScreenFitter.Client(contract: 3, capabilities: ["barcode_scanner", "share_sheet"])
        for _ in benchmark.scaledIterations {
            blackHole(fitter.encodeScreen(screen, for: client))
        }
    }

    Benchmark("Encode only, 200-component screen") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(JSONEncoding.encode(screen)) }
    }

    let signer = try! PayloadSigner(configuration: "bench:" + Data(repeating: 7, count: 32).base64EncodedString())
    let claims = PayloadClaims(
        subject: "user:1234", flow: "playlist-create", sessionID: UUID(), step: 3, event: "submit", expires: 4_102_444_800)
    let payload = signer.sign(claims)
    Benchmark("Sign a command payload") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(signer.sign(claims)) }
    }
    Benchmark("Verify a command payload") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(signer.verify(payload)) }
    }
}
