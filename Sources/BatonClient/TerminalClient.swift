import BatonJSON

/// How the client reaches a server: one request, one reply. The command line uses HTTP; the
/// tests answer from an application in the same process.
public protocol ClientTransport: Sendable {
    func send(method: String, path: String, headers: [(String, String)], body: [UInt8]?) async throws -> ClientTransportReply
}

public struct ClientTransportReply: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Who the client is and what it says it can do: the headers of PROTOCOL §1.
public struct ClientIdentityOptions: Sendable {
    public var contract: Int
    public var platform: String
    public var capabilities: [String]
    public var bearerToken: String?
    public var deviceID: String?
    /// Sent as `X-Client-Version` when set; unset keeps the walk out of per-app-version figures.
    public var appVersion: String?

    public init(
        contract: Int = 3, platform: String = "ios", capabilities: [String] = [], bearerToken: String? = nil, deviceID: String? = nil,
        appVersion: String? = nil
    ) {
        self.contract = contract
        self.platform = platform
        self.appVersion = appVersion
        self.capabilities = capabilities
        self.bearerToken = bearerToken
        self.deviceID = deviceID
    }

    var headers: [(String, String)] {
        var headers = [("X-Client-Platform", platform), ("Accept", "application/json")]
        if let appVersion { headers.append(("X-Client-Version", appVersion)) }
        if !capabilities.isEmpty { headers.append(("X-Client-Capabilities", capabilities.joined(separator: ","))) }
        if let bearerToken { headers.append(("Authorization", "Bearer \(bearerToken)")) }
        if let deviceID { headers.append(("X-Device-Id", deviceID)) }
        return headers
    }
}

/// A terminal walk-through of a running Baton: draws each screen and reply as text, and lets
/// a person follow actions and answer input requests — what a phone would do, in a shell.
///
/// The screens a person navigates to form a stack; screens a flow shows sit on top of it
/// until the flow ends, when the screen behind is fetched again if the reply asks for it.
public final class TerminalClient {
    let transport: any ClientTransport
    let identity: ClientIdentityOptions
    let ask: (String) -> String?
    let write: (String) -> Void

    /// What is on screen: a named screen (fetched again on refresh) or one a flow showed.
    enum Entry {
        case named(String, query: String)
        case shown(JSONValue)
    }

    private var stack: [Entry] = []
    private var current: ScreenText?
    /// The device token the server issued for `identity.deviceID` (PROTOCOL §1), sent back on
    /// every later request.
    private var deviceToken: String?
    /// Whether the last request went unanswered or was refused (no server, a 4xx or 5xx): the
    /// `client` command's exit status, so that a script sees a walk that ended in an error.
    public private(set) var lastRequestFailed = false

    /// - Parameters:
    ///   - ask: shows a prompt and reads the answer (nil at the end of input).
    ///   - write: shows one line.
    public init(transport: any ClientTransport, identity: ClientIdentityOptions, ask: @escaping (String) -> String?, write: @escaping (String) -> Void) {
        self.transport = transport
        self.identity = identity
        self.ask = ask
        self.write = write
    }

    /// Opens `screen` (with a query string such as `id=…`) and runs until the person quits or
    /// the input ends.
    public func run(screen: String, query: String = "") async {
        stack = [.named(screen, query: query)]
        await show()
        while let line = prompt("> ") {
            let command = line.trimmed(" \t")
            switch command {
            case "": continue
            case "q", "quit", "exit": return
            case "?", "h", "help":
                write("Type the number of an item (m1, m2… for the menu), b to go back, r to reload, q to quit.")
            case "r": await show()
            case "b":
                if stack.count > 1 { stack.removeLast() } else { write("(this is the first screen)") }
                await show()
            default:
                guard let choice = current?.choices.first(where: { $0.key == command }) else {
                    write("No item \(command). Type ? for help.")
                    continue
                }
                await pick(choice)
            }
        }
    }

    // MARK: - Screens

    private func show() async {
        guard let top = stack.last else { return }
        switch top {
        case .named(let name, let query):
            let path = "/v\(identity.contract)/screens/\(name)" + (query.isEmpty ? "" : "?\(query)")
            guard let reply = await request("GET", path) else { return }
            draw(screen: reply)
        case .shown(let screen):
            draw(screen: screen)
        }
    }

    private func draw(screen: JSONValue) {
        let text = ScreenText(screen: screen)
        current = text
        write("")
        text.lines.forEach(write)
    }

    // MARK: - Actions

    private func pick(_ choice: ScreenText.Choice) async {
        let action = choice.action
        switch action["type"]?.stringValue {
        case "command", "startFlow":
            var input: JSONValue?
            switch choice.asks {
            case .nothing: break
            case .text(let label):
                guard let text = prompt("\(label): ") else { return }
                input = ["text": .string(text)]
            case .barcode(let label):
                guard let code = prompt("\(label) (type the code): ") else { return }
                input = ["barcode": .string(code)]
            }
            await command(action, input: input)
        case "scanBarcode":
            guard let code = prompt("Barcode (type the code): ") else { return }
            await command(action, input: ["barcode": .string(code)])
        case "navigate":
            let screen = action["screen"]?.stringValue ?? "home"
            let query = (action["params"]?.objectValue ?? [:]).map { "\($0.key)=\(Self.queryEscaped($0.value.interpolationText))" }
                .joined(separator: "&")
            stack.append(.named(screen, query: query))
            await show()
        case "openUrl":
            write("↗ would open \(action["url"]?.stringValue ?? "?")")
        case "share":
            write("↗ would share: \(action["text"]?.stringValue ?? action["url"]?.stringValue ?? "")")
        case "close":
            if stack.count > 1 { stack.removeLast() }
            await show()
        default:
            write("(\(action["type"]?.stringValue ?? "this") is not an action a client can perform)")
        }
    }

    /// POSTs a command, then follows its reply until the flow ends or shows a screen.
    private func command(_ action: JSONValue, input: JSONValue?) async {
        var next: (action: JSONValue, input: JSONValue?)? = (action, input)
        while let (action, input) = next {
            next = nil
            var body: JSONObject = ["payload": action["payload"] ?? .null]
            if let input { body["input"] = input }
            let path = action["url"]?.stringValue ?? "/v\(identity.contract)/command"
            guard let reply = await request("POST", path, body: .object(body)) else { return }
            next = await handle(reply)
        }
    }

    /// Acts on a command reply; returns the next command to send, if the person answered one.
    private func handle(_ reply: JSONValue) async -> (JSONValue, JSONValue?)? {
        switch reply["type"]?.stringValue {
        case "done":
            write("✓ \(reply["message"]?.stringValue ?? "Done")")
            finishFlow()
            await show()
        case "refresh":
            finishFlow()
            await show()
        case "screen":
            let screen = reply["screen"] ?? .null
            if reply["presentation"]?.stringValue == "replace", case .shown? = stack.last { stack.removeLast() }
            stack.append(.shown(screen))
            draw(screen: screen)
        case "input":
            return answer(reply)
        case "error":
            write("✗ \(reply["message"]?.stringValue ?? "Something went wrong")")
            if let retry = reply["retry"], let line = prompt("\(retry["title"]?.stringValue ?? "Try again")? [y/N] "),
                line.lowercased().hasPrefix("y")
            {
                return (retry, nil)
            }
            finishFlow()
            await show()
        default:
            write("(an answer of a kind this client does not know)")
        }
        return nil
    }

    /// Asks the person what an input request wants; nil when they cancel with nothing to send.
    private func answer(_ reply: JSONValue) -> (JSONValue, JSONValue?)? {
        write("")
        write("? \(reply["title"]?.stringValue ?? "Input")")
        if let message = reply["message"]?.stringValue { write("  \(message)") }
        if let error = reply["error"]?.stringValue { write("  ✗ \(error)") }
        let field = reply["input"] ?? .null
        let submit = reply["submit"] ?? .null
        let cancel = reply["cancel"]
        let cancelHint = cancel == nil ? "" : " (empty line or /cancel to cancel)"
        if field["kind"]?.stringValue == "choice" {
            let options = field["options"]?.arrayValue ?? []
            for (index, option) in options.enumerated() {
                let subtitle = option["subtitle"]?.stringValue.map { " — \($0)" } ?? ""
                write("  \(index + 1)) \(option["title"]?.stringValue ?? "")\(subtitle)")
            }
            let multiple = field["multiple"]?.boolValue ?? false
            guard let line = prompt(multiple ? "Pick (numbers, comma-separated)\(cancelHint): " : "Pick a number\(cancelHint): ") else { return nil }
            if line.isEmpty || line == "/cancel" { return cancel.map { ($0, nil) } }
            let picked = line.split(separator: ",").compactMap { Int(String($0).trimmed(" ")) }
                .filter { options.indices.contains($0 - 1) }.map { options[$0 - 1]["id"] ?? .null }
            if multiple { return (submit, ["choices": .array(picked)]) }
            return (submit, ["choice": picked.first ?? .string(line)])
        }
        let current = field["value"]?.stringValue ?? ""
        let hint = current.isEmpty ? (field["placeholder"]?.stringValue.map { " [\($0)]" } ?? "") : " [now: \(current)]"
        guard let line = prompt("Text\(hint)\(cancelHint): ") else { return nil }
        if line == "/cancel" || (line.isEmpty && cancel != nil) { return cancel.map { ($0, nil) } }
        return (submit, ["text": .string(line)])
    }

    /// Ends what a flow put on screen; the caller fetches the screen behind again (a terminal
    /// has no cached copy to keep, so `refresh: false` changes nothing here).
    private func finishFlow() {
        while case .shown? = stack.last, stack.count > 1 { stack.removeLast() }
    }

    // MARK: - Wire

    private func request(_ method: String, _ path: String, body: JSONValue? = nil) async -> JSONValue? {
        var headers = identity.headers
        if let deviceToken, identity.deviceID != nil { headers.append(("X-Device-Token", deviceToken)) }
        if body != nil { headers.append(("Content-Type", "application/json")) }
        do {
            let reply = try await transport.send(method: method, path: path, headers: headers, body: body.map(JSONEncoding.encode))
            if let issued = reply.headers.first(where: { $0.0.lowercased() == "x-device-token" })?.1 { deviceToken = issued }
            let json = try? JSONValue.parse(reply.body)
            guard (200..<300).contains(reply.status), let json else {
                let message = json?["error"]?["message"]?.stringValue ?? String(decoding: reply.body.prefix(300), as: UTF8.self)
                write("✗ \(method) \(path): HTTP \(reply.status): \(message)")
                lastRequestFailed = true
                return nil
            }
            lastRequestFailed = false
            if reply.headers.contains(where: { $0.0.lowercased() == "idempotent-replay" }) { write("(a replay: the server had already answered this command)") }
            return json
        } catch {
            write("✗ \(method) \(path): \(error)")
            lastRequestFailed = true
            return nil
        }
    }

    private func prompt(_ text: String) -> String? {
        ask(text)
    }

    static func queryEscaped(_ text: String) -> String {
        var allowed = [UInt8]()
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                allowed.append(byte)
            default:
                allowed.append(contentsOf: Array("%\(String(byte, radix: 16, uppercase: true).count == 1 ? "0" : "")\(String(byte, radix: 16, uppercase: true))".utf8))
            }
        }
        return String(decoding: allowed, as: UTF8.self)
    }
}

extension String {
    fileprivate func trimmed(_ set: String) -> String {
        var text = Substring(self)
        while let first = text.first, set.contains(first) { text = text.dropFirst() }
        while let last = text.last, set.contains(last) { text = text.dropLast() }
        return String(text)
    }
}
