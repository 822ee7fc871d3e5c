import BatonContract
import BenchmarkScreens
import BatonFlows
import BatonJSON
import BatonRuntime
import BatonServer
import Benchmark
import Crypto
import ExtrasBase64
import Foundation

/// `Flows/screens/playlist.yaml`, as the server loads it.
let playlistScreen: ScreenTemplate = {
    let file = repository.appendingPathComponent("Flows/screens/playlist.yaml").path
    let (template, diagnostics) = ScreenTemplate.load(source: try! String(contentsOfFile: file, encoding: .utf8), file: file)
    precondition(!diagnostics.hasErrors, "\(diagnostics)")
    return template!
}()

/// The scope `ScreenRendering.render` builds for the playlist screen: the owner looking at a
/// playlist of 25 tracks, with what the `playlists.get` loader returns.
func playlistScope() -> TemplateScope {
    let id = "5f0c2a8e-1b7d-4c3e-9a61-2f4b8d9e0a17"
    let tracks: [JSONValue] = (0..<25).map { index in
        [
            "id": .string("0b6e4c1a-7d2f-4e8b-a3c5-\(String(100_000_000_000 + index))"), "title": .string("Track \(index)"),
            "artist": "Some Artist", "duration": .string("3:\(10 + index)"),
        ]
    }
    let playlist: JSONValue = [
        "id": .string(id), "name": "Road trip", "description": "Songs for the long way round",
        "artwork": "https://img.example.com/playlists/default.jpg", "isOwner": true, "isPublic": true, "favourite": false,
        "canAddFavourite": true, "trackCount": .int(tracks.count), "tracksLabel": "25 tracks", "tracks": .array(tracks),
    ]
    return TemplateScope([
        "params": ["id": .string(id)], "subject": FlowSubject(kind: .user, id: "1234").jsonValue, "error": .null,
        "data": ["playlist": playlist],
    ])
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

    // Every screen response: SHA-256 of the body with its payloads masked.
    let body = fitter.encodeScreen(screen, for: ScreenFitter.Client(contract: 3, capabilities: [])).bytes
    Benchmark("ETag of the fitted 200-component screen") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(ScreenReply(body: body, subject: "user:1234", validUntil: 4_102_444_800).etag) }
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

    // What ReplyEncoder.start does for every startFlow action of a rendered screen.
    Benchmark("Mint a start payload") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(
                signer.sign(
                    PayloadClaims(
                        subject: "user:1234", flow: "playlist-remove-track", sessionID: nil, step: 0, event: "start",
                        expires: 4_102_444_800,
                        parameters: ["playlist": "5f0c2a8e-1b7d-4c3e-9a61-2f4b8d9e0a17", "track": "0b6e4c1a-7d2f-4e8b-a3c5-100000000007"],
                        nonce: PayloadSigner.makeNonce())))
        }
    }

    // What ScreenCache.answer does for every start action of a held screen: the same claims,
    // encoded and hashed ahead but for the nonce (made once, at the held screen's first answer).
    let startClaims = PayloadClaims(
        subject: "user:1234", flow: "playlist-remove-track", sessionID: nil, step: 0, event: "start", expires: 4_102_444_800,
        parameters: ["playlist": "5f0c2a8e-1b7d-4c3e-9a61-2f4b8d9e0a17", "track": "0b6e4c1a-7d2f-4e8b-a3c5-100000000007"])
    Benchmark("Make a start payload's template") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(signer.startTemplate(startClaims)) }
    }
    let template = signer.startTemplate(startClaims)!
    // What ScreenCache.answer did per start action before the templates: the held claims
    // copied, the subject and a nonce set, signed, the string's bytes appended.
    Benchmark("Mint a start payload from held claims") { benchmark in
        var output: [UInt8] = []
        output.reserveCapacity(1024)
        for _ in benchmark.scaledIterations {
            output.removeAll(keepingCapacity: true)
            var claims = startClaims
            claims.subject = "user:1234"
            claims.nonce = PayloadSigner.makeNonce()
            output.append(contentsOf: signer.sign(claims).utf8)
            blackHole(output)
        }
    }
    Benchmark("Mint a start payload from its template") { benchmark in
        var output: [UInt8] = []
        output.reserveCapacity(1024)
        for _ in benchmark.scaledIterations {
            output.removeAll(keepingCapacity: true)
            blackHole(signer.sign(template, into: &output))
            blackHole(output)
        }
    }

    let scope = playlistScope()
    Benchmark("Render the playlist screen template (25 tracks)") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(playlistScreen.content.render(scope)) }
    }

    // Every screen and start command checks its parameters; the playlist's id has a pattern.
    let parameters: JSONObject = ["id": "5f0c2a8e-1b7d-4c3e-9a61-2f4b8d9e0a17"]
    Benchmark("Check the playlist screen's parameters (pattern ^[0-9a-f-]{36}$)") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(ParameterCheck.problem(parameters, specs: playlistScreen.parameters)) }
    }
    // The same pattern through Swift's Regex: what every check cost before the byte matcher.
    Benchmark("Match ^[0-9a-f-]{36}$ through Regex") { benchmark in
        let regex = try Regex("^[0-9a-f-]{36}$")
        let id = "5f0c2a8e-1b7d-4c3e-9a61-2f4b8d9e0a17"
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { blackHole(try regex.wholeMatch(in: id) != nil) }
    }

    let secret = "benchmark-secret-at-least-16-bytes"
    // A token's first request: its signature verified (nothing remembered).
    Benchmark("Verify a bearer token (HS256)") { benchmark in
        let authenticator = try await BearerAuthenticator(hs256Secret: secret, publicKeys: nil, issuer: nil, audience: nil, rememberedTokens: 0)
        let token = try await BearerAuthenticator.developmentToken(subject: "1234", secret: secret)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { blackHole(try await authenticator.user(fromToken: token)) }
    }
    // Every later request with the same token: its verified signature remembered, the clock's
    // checks made again.
    Benchmark("Verify a remembered bearer token (HS256)") { benchmark in
        let authenticator = try await BearerAuthenticator(hs256Secret: secret, publicKeys: nil, issuer: nil, audience: nil)
        let token = try await BearerAuthenticator.developmentToken(subject: "1234", secret: secret)
        _ = try await authenticator.user(fromToken: token)  // its first request, outside the measurement
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { blackHole(try await authenticator.user(fromToken: token)) }
    }
    // The same check for a token the fast path leaves to jwt-kit (its header names another
    // algorithm, which jwt-kit does not read; the key id is still read the cheap way): what
    // every HS256 token cost before.
    Benchmark("Verify a bearer token (HS256) through jwt-kit") { benchmark in
        let authenticator = try await BearerAuthenticator(hs256Secret: secret, publicKeys: nil, issuer: nil, audience: nil, rememberedTokens: 0)
        let fast = try await BearerAuthenticator.developmentToken(subject: "1234", secret: secret)
        let header = Base64.encodeToString(bytes: Array(#"{"alg":"HS512","typ":"JWT"}"#.utf8), options: [.base64UrlAlphabet, .omitPaddingCharacter])
        let input = header + "." + fast.split(separator: ".")[1]
        let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: Array(secret.utf8)))
        let token = input + "." + Base64.encodeToString(bytes: Array(mac), options: [.base64UrlAlphabet, .omitPaddingCharacter])
        let user = try await authenticator.user(fromToken: token)
        precondition(user == "1234")
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { blackHole(try await authenticator.user(fromToken: token)) }
    }
}
