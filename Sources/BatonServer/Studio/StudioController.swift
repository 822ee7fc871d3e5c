import BatonContract
import BatonDeepLinks
import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Synchronization

/// Baton Studio (docs/studio.md): `GET /studio` serves the page from `Studio/`, and
/// `/studio/api/…` tells it what the bundle holds and what the downgrade pass does to each
/// component. Screens and commands themselves go through the real `/v{N}/…` endpoints.
///
/// Not in `/openapi.json` (a development tool, not part of the wire contract); off unless
/// `BATON_STUDIO` says otherwise.
struct StudioController: Sendable {
    let mode: StudioMode
    let directory: URL
    let flowsDirectory: URL
    let runtime: FlowRuntime
    let authenticator: BearerAuthenticator
    /// The contract and allowlist served now (a release or a `--watch` reload swaps them).
    let live: LiveDefinitions
    /// The fitter for the served contract, made again when the served definitions change.
    private let fitting: Fitting

    private final class Fitting: Sendable {
        let made: Mutex<(generation: Int, contract: ContractRegistry, fitter: ScreenFitter)>
        init(_ made: (generation: Int, contract: ContractRegistry, fitter: ScreenFitter)) { self.made = Mutex(made) }
    }
    let pool: PostgresPool
    /// The application's flow catalog, for linting the files on disk again (nil: the lint of
    /// the bundle loaded at start).
    let catalog: FlowCatalog?
    let jwtSecret: String?
    let jwtIssuer: String?
    let jwtAudience: String?
    /// How long the studio's tokens live: 8 hours, or less when `baton.jwt.max.lifetime` says so
    /// (a longer one would be refused by the server the studio talks to).
    let tokenLifetime: Duration
    let graphs = StudioGraphs()

    /// The same pass the server fits with: the served contract, the served outbound allowlist.
    static func fitter(for served: LiveDefinitions.Served) -> ScreenFitter {
        var isAllowedURL: (@Sendable (String) -> Bool)?
        if let allowlist = served.allowlist { isAllowedURL = { url in allowlist.outbound(url).isAllowed } }
        return ScreenFitter(registry: served.contract, isAllowedURL: isAllowedURL)
    }

    /// The served contract and its fitter, made again after a swap.
    var current: (contract: ContractRegistry, fitter: ScreenFitter) {
        let generation = live.generation
        return fitting.made.withLock { fitting in
            if fitting.generation != generation {
                let served = live.served
                fitting = (generation, served.contract, Self.fitter(for: served))
            }
            return (fitting.contract, fitting.fitter)
        }
    }

    var contract: ContractRegistry { current.contract }
    var fitter: ScreenFitter { current.fitter }

    /// Users the studio offers in development (any name works: subjects are just ids).
    static let demoUsers = ["alice", "bob", "carol"]

    init(environment: BatonEnvironment, runtime: FlowRuntime, live: LiveDefinitions) {
        let configuration = environment.configuration
        mode = configuration.studio
        directory = URL(fileURLWithPath: configuration.studioDirectory).standardizedFileURL
        flowsDirectory = URL(fileURLWithPath: configuration.flowsDirectory).standardizedFileURL
        self.runtime = runtime
        authenticator = environment.authenticator
        self.live = live
        let served = live.served
        fitting = Fitting((live.generation, served.contract, Self.fitter(for: served)))
        pool = environment.pool
        catalog = environment.flowCatalog
        jwtSecret = configuration.jwtHS256Secret
        jwtIssuer = configuration.jwtIssuer
        jwtAudience = configuration.jwtAudience
        tokenLifetime = min(.seconds(8 * 3600), configuration.jwtMaxLifetime ?? .seconds(8 * 3600))
    }

    func register(on router: Router<BatonRequestContext>, logger: Logger) {
        if !FileManager.default.fileExists(atPath: directory.appendingPathComponent("index.html").path) {
            logger.warning("Baton Studio is on but its page is missing", metadata: ["directory": .string(directory.path)])
        }
        logger.notice(
            "Baton Studio at /studio",
            metadata: ["access": .string(mode == .development ? "open (development)" : "bearer token with a studio claim")])
        // The page and its scripts hold no data: served to anyone while the studio is on.
        router.on("/studio", method: .get) { _, _ in try file("index.html") }
        router.on("/studio/:file", method: .get) { _, context in try file(try context.parameters.require("file")) }
        router.on("/studio/renderer/:file", method: .get) { _, context in
            try file("renderer/" + (try context.parameters.require("file")))
        }
        api(router, "config") { _, _ in .json(config()) }
        api(router, "token") { request, _ in try await token(request) }
        api(router, "fit/:version/:name") { request, context in try await fit(request, context: context) }
        api(router, "state-fit/:version/:flow/:state") { request, context in try stateFit(request, context: context) }
        api(router, "start/:version/:flow") { request, context in try await start(request, context: context) }
        api(router, "sessions") { request, _ in try await sessions(request) }
        api(router, "graph/:flow") { _, context in try await graph(try context.parameters.require("flow")) }
        api(router, "lint") { _, _ in .json(lint()) }
        api(router, "coverage") { _, _ in .json(coverage()) }
    }

    /// A GET under `/studio/api/`, behind the studio's check.
    private func api(
        _ router: Router<BatonRequestContext>, _ path: String,
        _ handler: @escaping @Sendable (Request, BatonRequestContext) async throws -> Response
    ) {
        router.on(RouterPath("/studio/api/" + path), method: .get) { request, context in
            try await authorize(request)
            var response = try await handler(request, context)
            response.headers[.cacheControl] = "no-store"
            return response
        }
    }

    /// In development anyone on the loopback address may use the studio; otherwise only a
    /// bearer token with `"studio": true`.
    func authorize(_ request: Request) async throws {
        guard mode != .development else { return }
        guard let authorization = request.headers.value(.authorization) else {
            throw APIError.unauthenticated("Baton Studio needs a bearer token with a studio claim")
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw APIError.unauthenticated("Authorization must be 'Bearer <token>'")
        }
        let grant: (user: String, studio: Bool)
        do {
            grant = try await authenticator.studioGrant(fromToken: String(parts[1].trimmingOptionalWhitespace))
        } catch let failure as BearerAuthenticator.Failure {
            throw APIError.unauthenticated(failure.description)
        }
        guard grant.studio else { throw APIError.forbidden("the bearer token does not grant Baton Studio (no \"studio\": true claim)") }
    }

    // MARK: - The page

    static let contentTypes = ["html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
        "svg": "image/svg+xml", "png": "image/png", "json": "application/json; charset=utf-8"]

    /// A file of the studio directory, read on every request so edits show on reload.
    func file(_ name: String) throws -> Response {
        let parts = name.split(separator: "/")
        guard name.utf8.count <= 100, !parts.isEmpty,
            parts.allSatisfy({ part in
                !part.hasPrefix(".") && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
            }),
            let type = Self.contentTypes[String(parts.last!.split(separator: ".").last ?? "")]
        else { throw APIError.notFound("no such studio file") }
        guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path) else {
            // The directory is named on a development machine only: to anyone else, where the
            // server keeps its files is not theirs to know (the page needs no token).
            let place = mode == .development ? "in \(directory.path) " : ""
            throw APIError.notFound("no studio file \(name) \(place)(BATON_STUDIO_DIR)")
        }
        var headers: HTTPFields = [.contentType: type, .cacheControl: "no-cache", .init("X-Content-Type-Options")!: "nosniff"]
        if name.hasSuffix(".html") {
            // Screens carry text from flows and data: scripts only from here, requests only to here.
            headers[.init("Content-Security-Policy")!] =
                "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src * data:; connect-src 'self'; "
                + "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
            headers[.init("Referrer-Policy")!] = "no-referrer"
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    // MARK: - What the bundle holds

    func config() -> JSONValue {
        let bundle = runtime.bundle
        func parameters(_ specs: [ParameterSpec]) -> JSONValue {
            .array(
                specs.map { spec in
                    var object: JSONObject = ["name": .string(spec.name), "required": .bool(spec.required)]
                    if let pattern = spec.pattern { object["pattern"] = .string(pattern) }
                    return .object(object)
                })
        }
        let screens: [JSONValue] = bundle.screens.values.sorted { $0.name < $1.name }.map { screen in
            ["name": .string(screen.name), "title": screen.title.map { .string($0) } ?? .null, "params": parameters(screen.parameters)]
        }
        let flows: [JSONValue] = bundle.flows.values.sorted { $0.name < $1.name }.map { flow in
            [
                "name": .string(flow.name), "title": flow.title.map { .string($0) } ?? .null, "audience": .string(flow.audience.rawValue),
                "start": .string(flow.start), "states": .array(flow.stateOrder.map { .string($0) }), "params": parameters(flow.parameters),
            ]
        }
        let development = mode == .development && jwtSecret != nil
        return [
            "mode": .string(mode == .development ? "development" : "token"),
            "contract": ["oldest": .int(contract.oldest), "newest": .int(contract.newest)],
            "capabilities": .array(contract.allCapabilities.sorted().map { .string($0) }),
            "platforms": .array(ClientContext.platforms.sorted().map { .string($0) }),
            "components": .array(contract.components.keys.sorted().map { .string($0) }),
            "actions": .array(contract.actions.keys.sorted().map { .string($0) }),
            "demoUsers": .array(development ? Self.demoUsers.map { .string($0) } : []),
            "screens": .array(screens), "flows": .array(flows),
            "graphviz": .bool(StudioGraphs.dotExecutable != nil),
        ]
    }

    /// `?user=`: a development token for that user (development only).
    func token(_ request: Request) async throws -> Response {
        guard mode == .development, let secret = jwtSecret else {
            throw APIError.forbidden("the studio mints tokens only in development (BATON_STUDIO=dev with BATON_JWT_HS256_SECRET)")
        }
        let user = request.uri.queryParameters["user"].map(String.init) ?? ""
        guard !user.isEmpty, user.count <= 64, user.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.@".contains($0)) }) else {
            throw APIError.invalidRequest("user must be 1–64 letters, digits, - _ . @")
        }
        let token = try await BearerAuthenticator.developmentToken(
            subject: user, secret: secret, issuer: jwtIssuer, audience: jwtAudience, lifetime: tokenLifetime)
        return .json(["user": .string(user), "token": .string(token)])
    }

    // MARK: - Screens as each client sees them

    /// Who the studio acts as: `X-Studio-As: Bearer <user token>` or `X-Device-Id`.
    func subject(_ request: Request) async throws -> ClientIdentity {
        var identity = ClientIdentity()
        if let header = request.headers.value(.studioAs) {
            let parts = header.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw APIError.invalidRequest("X-Studio-As must be 'Bearer <token>'") }
            do { identity.user = try await authenticator.user(fromToken: String(parts[1])) } catch let failure as BearerAuthenticator.Failure {
                throw APIError.unauthenticated("X-Studio-As: \(failure.description)")
            }
        }
        if let device = request.headers.value(.deviceID) {
            guard let uuid = UUID(canonical: String(device.trimmingOptionalWhitespace)) else {
                throw APIError.invalidRequest("X-Device-Id must be a UUID")
            }
            identity.device = uuid.lowercased
        }
        return identity
    }

    /// The client of `/studio/api/fit/v{N}/…`, read like the real endpoints read it.
    func clientProfile(_ request: Request, version: String) throws -> ClientProfile {
        guard let number = ClientContext.contractVersion(version) else { throw APIError.notFound("not a contract version: \(version.prefix(8))") }
        return ClientContext.profile(request, contract: number)
    }

    /// The fitted screen and, per component, what the downgrade pass did to it.
    func fit(_ request: Request, context: BatonRequestContext) async throws -> Response {
        var profile = try clientProfile(request, version: try context.parameters.require("version"))
        let name = try context.parameters.require("name")
        let identity = try await subject(request)
        guard let version = contract.effectiveVersion(profile.contract) else {
            return .json(["screen": .null, "marks": [], "updateRequired": true])
        }
        let client = ScreenFitter.Client(contract: version, capabilities: profile.capabilities)
        let platform = profile.platform
        profile.platform = ContractFitter.unfittedPlatform
        let reply: ScreenReply
        do {
            reply = try await runtime.renderScreen(name, parameters: try ScreenController.parameters(request), identity: identity, profile: profile)
        } catch let error as CommandError {
            throw APIError(commandError: error)
        }
        let raw = try JSONValue.parse(reply.body, maxDepth: .max)
        let (fitted, _) = fitter.fitScreen(raw, for: client)
        let report = StudioFitReport(raw: raw, fitted: fitted, fitter: fitter, client: client)
        return .json([
            "client": [
                "contract": .int(profile.contract), "effectiveContract": .int(version), "platform": .string(platform),
                "capabilities": .array(client.capabilities.sorted().map { .string($0) }),
            ],
            "screen": fitted, "marks": report.json,
        ])
    }

    /// The marks for the screen a flow state answers with, from its template with sample
    /// values (a flow's replies cannot be rendered again without running the command).
    func stateFit(_ request: Request, context: BatonRequestContext) throws -> Response {
        let profile = try clientProfile(request, version: try context.parameters.require("version"))
        let flowName = try context.parameters.require("flow")
        let stateName = try context.parameters.require("state")
        guard let flow = runtime.bundle.flows[flowName], let state = flow.states[stateName] else {
            throw APIError.notFound("there is no state '\(stateName.prefix(64))' in flow '\(flowName.prefix(64))'")
        }
        guard case .screen(let spec) = state.response,
            let template = spec.inline ?? spec.templateName.flatMap({ runtime.bundle.screens[$0]?.content })
        else { return .json(["marks": .null, "reason": .string("state \(stateName) does not answer with a screen")]) }
        let version = contract.effectiveVersion(profile.contract) ?? contract.oldest
        let client = ScreenFitter.Client(contract: version, capabilities: profile.capabilities)
        let raw = template.sample()
        let (fitted, _) = fitter.fitScreen(raw, for: client)
        let report = StudioFitReport(raw: raw, fitted: fitted, fitter: fitter, client: client)
        return .json(["flow": .string(flowName), "state": .string(stateName), "marks": report.json])
    }

    /// A signed start payload for a flow, so the studio can walk any flow from its list.
    func start(_ request: Request, context: BatonRequestContext) async throws -> Response {
        let profile = try clientProfile(request, version: try context.parameters.require("version"))
        let flow = try context.parameters.require("flow")
        let identity = try await subject(request)
        do {
            let payload = try runtime.mintStart(
                flow: flow, parameters: try ScreenController.parameters(request), identity: identity, profile: profile)
            return .json(["url": .string(profile.commandURL), "payload": .string(payload)])
        } catch let error as CommandError {
            throw APIError(commandError: error)
        }
    }

    /// `?subject=user:alice`: the subject's latest sessions and their states (for the graph).
    func sessions(_ request: Request) async throws -> Response {
        let subject = request.uri.queryParameters["subject"].map(String.init) ?? ""
        guard FlowSubject(subject) != nil, subject.utf8.count <= 300 else {
            throw APIError.invalidRequest("subject must be user:<id> or device:<uuid>")
        }
        let rows = try await pool.query(
            "SELECT flow, state, step::bigint, status FROM flow_sessions WHERE subject = $1 ORDER BY updated_at DESC, step DESC LIMIT 10",
            [subject])
        var sessions: [JSONValue] = []
        for row in rows {
            sessions.append([
                "flow": .string(try row.decode(String.self, at: 0)), "state": .string(try row.decode(String.self, at: 1)),
                "step": .int(Int(try row.decode(Int64.self, at: 2))), "status": .string(try row.decode(String.self, at: 3)),
            ])
        }
        return .json(["subject": .string(subject), "sessions": .array(sessions)])
    }

    // MARK: - Flows, lint, coverage

    func graph(_ name: String) async throws -> Response {
        guard let flow = runtime.bundle.flows[name] else { throw APIError.notFound("there is no flow '\(name.prefix(64))'") }
        let dot = FlowGraph.dot(flow)
        var body: JSONObject = [
            "flow": .string(name), "dot": .string(dot), "mermaid": .string(FlowGraph.mermaid(flow)),
            "states": .array(flow.stateOrder.map { .string($0) }),
        ]
        switch await graphs.svg(flow: name, hash: flow.hash, dot: dot) {
        case .success(let svg):
            body["svg"] = .string(svg)
        case .failure(let problem):
            body["svg"] = .null
            body["message"] = .string(problem.description)
        }
        return .json(.object(body))
    }

    func lint() -> JSONValue {
        let diagnostics: [Diagnostic]
        let source: String
        if let catalog {
            diagnostics = FlowDefinitions.load(directory: flowsDirectory, catalog: catalog).diagnostics
            source = "files on disk"
        } else {
            diagnostics = runtime.bundle.diagnostics
            source = "bundle loaded at start"
        }
        return [
            "directory": .string(flowsDirectory.path), "source": .string(source),
            "errors": .int(diagnostics.filter { $0.severity == .error }.count),
            "diagnostics": .array(
                diagnostics.map { diagnostic in
                    [
                        "severity": .string(diagnostic.severity.rawValue), "file": .string(diagnostic.location.file),
                        "line": .int(diagnostic.location.line), "column": .int(diagnostic.location.column),
                        "message": .string(diagnostic.message), "text": .string(diagnostic.description),
                    ]
                }),
        ]
    }

    func coverage() -> JSONValue {
        let versions = Array(contract.oldest...contract.newest)
        func fallbackText(_ fallback: Fallback) -> String {
            switch fallback {
            case .omit: "omitted"
            case .component(let type, _, _): "→ \(type)"
            }
        }
        let components: [JSONValue] = contract.components.values.sorted { ($0.since, $0.name) < ($1.since, $1.name) }.map { spec in
            [
                "name": .string(spec.name), "since": .int(spec.since), "capabilities": .array(spec.capabilities.map { .string($0) }),
                "fallback": .string(fallbackText(spec.fallback)), "description": spec.description.map { .string($0) } ?? .null,
            ]
        }
        let actions: [JSONValue] = contract.actions.values.sorted { ($0.since, $0.name) < ($1.since, $1.name) }.map { spec in
            [
                "name": .string(spec.name), "since": .int(spec.since), "capabilities": .array(spec.capabilities.map { .string($0) }),
                "fallback": .string(spec.fallback.map { "→ \($0)" } ?? "omitted"), "description": spec.description.map { .string($0) } ?? .null,
            ]
        }
        let linter = ContractLinter(registry: contract)
        let everything = contract.allCapabilities
        let shortfalls: [JSONValue] = versions.flatMap { version -> [JSONValue] in
            [Set<String>(), everything].map { capabilities in
                [
                    "contract": .int(version), "capabilities": .array(capabilities.sorted().map { .string($0) }),
                    "shortfalls": .array(
                        linter.shortfalls(runtime.bundle, for: .init(contract: version, capabilities: capabilities)).map { .string($0) }),
                ]
            }
        }
        return [
            "versions": .array(versions.map { .int($0) }), "components": .array(components), "actions": .array(actions),
            "shortfalls": .array(shortfalls),
        ]
    }
}

/// Flow graphs as SVG, drawn by Graphviz `dot` when it is installed, once per definition.
final class StudioGraphs: Sendable {
    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    private let cache = Mutex<[String: String]>([:])
    /// Drawings under way: requests for the same graph meanwhile wait for the one `dot`.
    private let drawing = Mutex<[String: SharedResult<Result<String, Problem>>]>([:])

    /// How long `dot` may take before it is killed (a huge or pathological graph).
    static let dotTimeout: Duration = .seconds(10)
    /// Where `dot` is, looked up at each drawing (installing Graphviz needs no restart).
    private let locate: @Sendable () -> String?

    init(locate: @escaping @Sendable () -> String? = { StudioGraphs.dotExecutable }) {
        self.locate = locate
    }

    static var dotExecutable: String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin", "/opt/homebrew/bin"] {
            let candidate = directory + "/dot"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    func svg(flow: String, hash: String, dot: String) async -> Result<String, Problem> {
        let key = flow + "@" + hash
        if let svg = cache.withLock({ $0[key] }) { return .success(svg) }
        guard let executable = locate() else {
            return .failure(
                Problem(
                    description: "Graphviz is not installed (no `dot` on PATH): showing the Mermaid text instead. "
                        + "scripts/bootstrap.sh --test installs it."))
        }
        let (shared, draws) = drawing.withLock { drawing -> (SharedResult<Result<String, Problem>>, Bool) in
            if let running = drawing[key] { return (running, false) }
            let fresh = SharedResult<Result<String, Problem>>()
            drawing[key] = fresh
            return (fresh, true)
        }
        guard draws else {
            return await shared.value(until: .now + Self.dotTimeout + .seconds(1))
                ?? .failure(Problem(description: "dot is still drawing this graph; try again"))
        }
        let result = await Self.run(executable, ["-Tsvg"], input: Array(dot.utf8), timeout: Self.dotTimeout)
        let drawn: Result<String, Problem>
        if result.status == 0, let start = result.output.range(of: "<svg") {
            let svg = String(result.output[start.lowerBound...])
            cache.withLock { $0[key] = svg }
            drawn = .success(svg)
        } else {
            drawn = .failure(Problem(description: "dot failed (status \(result.status)): \(result.output.prefix(300))"))
        }
        drawing.withLock { _ = $0.removeValue(forKey: key) }
        shared.finish(drawn)
        return drawn
    }

    /// A tool that exits before reading all its input (a `dot` that failed) breaks the pipe the
    /// writer is writing to. By default that raises SIGPIPE, which ends the process, the server
    /// with it: it is ignored instead, once for the process, and the write fails with EPIPE.
    private static let brokenPipesIgnored: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Runs a short-lived tool on a thread of its own (it blocks while it waits); one still
    /// running after `timeout` is killed.
    static func run(_ executable: String, _ arguments: [String], input: [UInt8], timeout: Duration) async -> (status: Int32, output: String) {
        _ = brokenPipesIgnored
        return await withCheckedContinuation { continuation in
            let thread = Thread {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: executable)
                process.arguments = arguments
                let stdin = Pipe()
                let stdout = Pipe()
                process.standardInput = stdin
                process.standardOutput = stdout
                process.standardError = stdout
                do { try process.run() } catch {
                    continuation.resume(returning: (-1, "\(error)"))
                    return
                }
                let writer = Thread {
                    // The throwing write: the other one traps on EPIPE.
                    try? stdin.fileHandleForWriting.write(contentsOf: input)
                    try? stdin.fileHandleForWriting.close()
                }
                writer.start()
                let pid = process.processIdentifier
                let exited = ExitFlag()
                let milliseconds = Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) {
                    exited.unlessSet { kill(pid, SIGKILL) }
                }
                let output = stdout.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                exited.set()
                continuation.resume(returning: (process.terminationStatus, String(decoding: output, as: UTF8.self)))
            }
            thread.start()
        }
    }
}

/// Whether a tool has exited, for the timer that would kill it.
private final class ExitFlag: Sendable {
    private let exited = Mutex(false)
    func set() { exited.withLock { $0 = true } }
    func unlessSet(_ action: () -> Void) { exited.withLock { if !$0 { action() } } }
}

extension HTTPField.Name {
    /// Whom Baton Studio renders a screen or starts a flow as: `Bearer <user token>`.
    static let studioAs = Self("X-Studio-As")!
}
