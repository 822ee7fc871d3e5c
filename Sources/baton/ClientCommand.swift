import ArgumentParser
import AsyncHTTPClient
import BatonClient
import BatonServer
import Foundation
import NIOCore
import NIOHTTP1

/// `baton client`: walk a running server's screens and flows from a terminal.
struct ClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client",
        abstract: "Walk a running Baton from the terminal: see screens as text, follow actions, answer inputs.",
        discussion: """
            Type an item's number to follow its action (m1, m2… for the menu), b to go back, r to reload, q to quit.
            With --user, a development token is minted from BATON_JWT_HS256_SECRET (default: the development \
            secret scripts/run.sh serves with); with --device, the client is an anonymous device (App Clip).
            """
    )

    @Argument(help: "The screen to open, with an optional query: home, catalog, 'playlist?id=…'.")
    var screen: String = "home"

    @Option(help: "The server's base URL.")
    var url: String = "http://127.0.0.1:8080"

    @Option(help: "Sign in as this user id (mints a development token).")
    var user: String?

    @Option(help: "A bearer token to send as is.")
    var token: String?

    @Option(help: "Be an anonymous device with this id (a UUID).")
    var device: String?

    @Option(help: "The contract version the client speaks.")
    var contract: Int = 3

    @Option(help: "ios, android, web, appclip, widget.")
    var platform: String = "ios"

    @Option(help: "Device capabilities, comma-separated (e.g. barcode_scanner).")
    var capabilities: String = "barcode_scanner"

    @Option(help: "The app version to claim (X-Client-Version), e.g. 2.4.0; unset sends none.")
    var appVersion: String?

    @OptionGroup var common: CommonOptions

    func validate() throws {
        guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme?.lowercased() ?? ""), parsed.host?.isEmpty == false
        else { throw ValidationError("--url must be the server's base URL, such as http://127.0.0.1:8080; got '\(url.prefix(80))'") }
        if let user, !isUsableUserArgument(user) {
            throw ValidationError("--user must be 1–256 bytes of UTF-8 without control characters, not only spaces")
        }
    }

    func run() async throws {
        var bearer = token
        if let user, bearer == nil {
            do { bearer = try await developmentToken(subject: user, common: common, fitToLimit: true) } catch { fail("\(error)") }
        }
        if bearer == nil, device == nil {
            say("(neither --user, --token nor --device: the server will treat this client as anonymous)")
        }
        let identity = ClientIdentityOptions(
            contract: contract, platform: platform,
            capabilities: capabilities.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty },
            bearerToken: bearer, deviceID: device, appVersion: appVersion)
        let transport = HTTPTransport(baseURL: url.hasSuffix("/") ? String(url.dropLast()) : url)
        let client = TerminalClient(
            transport: transport, identity: identity,
            ask: { prompt in
                FileHandle.standardOutput.write(Data(prompt.utf8))
                return readLine()
            },
            write: say)
        let (name, query) = screen.firstIndex(of: "?").map { (String(screen[..<$0]), String(screen[screen.index(after: $0)...])) }
            ?? (screen, "")
        say("Baton at \(url) — contract \(contract), \(platform). Type ? for help.")
        await client.run(screen: name, query: query)
        // A walk whose last request failed (no server, a refusal) ends with status 1.
        if client.lastRequestFailed { throw ExitCode.failure }
    }
}

/// A user id given on the command line that a token may carry: one the server accepts, that
/// was valid UTF-8 as typed (the shell's bytes otherwise arrive with U+FFFD in their place, a
/// user other than the one meant), and not only spaces.
private func isUsableUserArgument(_ user: String) -> Bool {
    BearerAuthenticator.isUsableSubject(user) && !user.unicodeScalars.contains("\u{FFFD}") && !user.allSatisfy(\.isWhitespace)
}

/// Unbuffered, so prompts and lines appear in order.
private func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// `baton token`: a development bearer token, for curl and other tools.
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print a development bearer token (HS256, from BATON_JWT_HS256_SECRET or the development secret) for a user id.",
        discussion: "For local use with curl: curl -H \"Authorization: Bearer $(baton token alice)\" …"
    )

    @Argument(help: "The user id (the token's subject).")
    var subject: String

    @Option(help: "How long the token is valid, in seconds.")
    var lifetime: Int = 3600

    @OptionGroup var common: CommonOptions

    func validate() throws {
        guard (1...31_536_000).contains(lifetime) else { throw ValidationError("--lifetime must be 1–31536000 seconds") }
        // A token the server would refuse is no use to print.
        guard isUsableUserArgument(subject) else {
            throw ValidationError("the user id must be 1–256 bytes of UTF-8 without control characters, not only spaces")
        }
    }

    func run() async throws {
        do {
            print(try await developmentToken(subject: subject, common: common, lifetime: .seconds(lifetime)))
        } catch {
            fail("\(error)")
        }
    }
}

/// With `fitToLimit` (the client, which has no `--lifetime`), a lifetime over the configuration's
/// `baton.jwt.max.lifetime` is shortened to it; otherwise it is refused.
private func developmentToken(
    subject: String, common: CommonOptions, lifetime: Duration = .seconds(3600), fitToLimit: Bool = false
) async throws -> String {
    let configuration = try await common.loadConfiguration()
    // scripts/run.sh serves with the development secret; a token minted with it is refused by
    // any server configured with a secret of its own (`serve` warns loudly when it is not).
    let secret = configuration.jwtHS256Secret ?? BearerAuthenticator.developmentSecret
    var lifetime = lifetime
    if let limit = configuration.jwtMaxLifetime, lifetime > limit, fitToLimit { lifetime = limit }
    if let limit = configuration.jwtMaxLifetime, lifetime > limit {
        throw CommandFailure("the token would live \(lifetime.components.seconds) s; this configuration accepts at most \(limit.components.seconds) s (baton.jwt.max.lifetime): pass --lifetime")
    }
    return try await BearerAuthenticator.developmentToken(
        subject: subject, secret: secret, issuer: configuration.jwtIssuer, audience: configuration.jwtAudience, lifetime: lifetime)
}

/// The client's requests over HTTP.
struct HTTPTransport: ClientTransport {
    let baseURL: String

    /// A person waits at the prompt: a server that is not there is said at once, not retried
    /// until the request's timeout as `HTTPClient.shared` does (it sat 30 s on a refused port).
    static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(3))
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// Why a request got no answer, in the person's terms.
    struct Unreachable: Error, CustomStringConvertible {
        let description: String
    }

    func send(method: String, path: String, headers: [(String, String)], body: [UInt8]?) async throws -> ClientTransportReply {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = HTTPMethod(rawValue: method)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response: HTTPClientResponse
        do {
            response = try await Self.client.execute(request, timeout: .seconds(30))
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            throw Unreachable(description: "no answer from \(baseURL) within 30 s")
        } catch let error as HTTPClientError where error == .connectTimeout {
            throw Unreachable(description: "cannot reach \(baseURL): no connection within 3 s")
        } catch let error as HTTPClientError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // The connection's own failure: the system's words for an errno ("connection
            // refused"), else NIO's text (an unknown host).
            let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)).lowercased() } ?? "\(error)"
            throw Unreachable(description: "cannot reach \(baseURL) (is Baton running there? scripts/run.sh starts one): \(reason)")
        }
        let bytes = try await response.body.collect(upTo: 8 << 20)
        return ClientTransportReply(
            status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) }, body: Array(buffer: bytes))
    }
}
