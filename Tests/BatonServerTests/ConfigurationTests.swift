@testable import BatonServer
import Configuration
import Foundation
import Logging
import Testing

@Suite("Configuration")
struct ConfigurationTests {
    func configuration(_ values: [AbsoluteConfigKey: ConfigValue]) throws -> BatonConfiguration {
        try BatonConfiguration(reader: ConfigReader(provider: InMemoryProvider(values: values)))
    }

    @Test("defaults: embedded database, loopback on 8080, 64 KiB bodies, JSON logs at info")
    func defaults() throws {
        let configuration = try configuration([:])
        #expect(configuration.databaseURL == nil)
        #expect(configuration.httpHost == "127.0.0.1")
        #expect(configuration.httpPort == 8080)
        #expect(configuration.bodyLimit == 65536)
        #expect(configuration.flowsDirectory == "Flows")
        #expect(configuration.logLevel == .info)
        #expect(configuration.logFormat == .json)
        #expect(configuration.migrateOnStart)
        #expect(!configuration.diagnostics)
        #expect(configuration.requestTimeout == .seconds(10))
        #expect(configuration.idleTimeout == .seconds(75))
    }

    @Test("a number or a boolean where text belongs (a JSON file's \"studio\": true) is refused, not read as unset; a secret's value is not repeated")
    func textKeysRefuseOtherKinds() throws {
        for (key, value) in [("baton.studio", ConfigValue(.int(12), isSecret: false)), ("http.host", ConfigValue(.bool(true), isSecret: false))] {
            do {
                _ = try configuration([AbsoluteConfigKey(key.split(separator: ".").map(String.init)): value])
                Issue.record("\(key) = \(value) was read as unset")
            } catch let error as BatonConfiguration.Error {
                #expect(error.description.contains("\(key) (") && error.description.contains("must be text"), "\(error)")
            }
        }
        do {
            _ = try configuration([AbsoluteConfigKey(["baton", "jwt", "hs256", "secret"]): ConfigValue(.int(424_242), isSecret: true)])
            Issue.record("a number for a secret was read as unset")
        } catch let error as BatonConfiguration.Error {
            #expect(!error.description.contains("424242"), "\(error)")
        }
        // Text is text, and an unset key still takes its default. The studio's switch takes
        // JSON's true and false as its words `true` and `false`.
        #expect(try configuration([AbsoluteConfigKey(["baton", "studio"]): ConfigValue(.string("true"), isSecret: false)]).studio == .enabled)
        #expect(try configuration([AbsoluteConfigKey(["baton", "studio"]): ConfigValue(.bool(true), isSecret: false)]).studio == .enabled)
        #expect(try configuration([AbsoluteConfigKey(["baton", "studio"]): ConfigValue(.bool(false), isSecret: false), AbsoluteConfigKey(["baton", "dev"]): ConfigValue(.bool(true), isSecret: false)]).studio == .off)
        #expect(try configuration([:]).studio == .off)
        // An empty variable is unset (a blank BATON_FLOWS_DIR used to mean the working directory).
        let blank = try BatonConfiguration(
            reader: ConfigReader(provider: EnvironmentVariablesProvider(environmentVariables: ["BATON_FLOWS_DIR": "", "LOG_LEVEL": " ", "HTTP_HOST": ""])))
        #expect(blank.flowsDirectory == "Flows")
        #expect(blank.logLevel == .info)
        #expect(blank.httpHost == "127.0.0.1")
    }

    @Test("environment variables map to keys (DATABASE_URL → database.url, ...)")
    func environment() throws {
        let reader = ConfigReader(
            provider: EnvironmentVariablesProvider(environmentVariables: [
                "DATABASE_URL": "postgresql://u:p@db/app", "HTTP_PORT": "9090", "HTTP_HOST": "0.0.0.0",
                "BATON_FLOWS_DIR": "/srv/flows", "LOG_LEVEL": "warn", "LOG_FORMAT": "logfmt", "BATON_SIGNING_KEYS": "k1:c2VjcmV0",
                "DATABASE_POOL_SIZE": "20",
            ]))
        let configuration = try BatonConfiguration(reader: reader)
        #expect(configuration.databaseURL == "postgresql://u:p@db/app")
        #expect(configuration.httpPort == 9090)
        #expect(configuration.httpHost == "0.0.0.0")
        #expect(configuration.flowsDirectory == "/srv/flows")
        #expect(configuration.logLevel == .warning)
        #expect(configuration.logFormat == .logfmt)
        #expect(configuration.signingKeys == "k1:c2VjcmV0")
        #expect(configuration.poolSize == 20)
    }

    @Test("flags override the environment, which overrides the config file")
    func layering() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("baton-\(UUID().uuidString).yaml")
        defer { try? FileManager.default.removeItem(at: file) }
        try "http:\n  port: 7000\n  host: 10.0.0.1\nlog:\n  level: debug\n".write(to: file, atomically: true, encoding: .utf8)
        let reader = try await BatonConfiguration.reader(
            flags: ["http.port": ConfigValue(.int(7001), isSecret: false)], configFile: file.path)
        let configuration = try BatonConfiguration(reader: reader)
        #expect(configuration.httpPort == 7001)
        #expect(configuration.httpHost == "10.0.0.1")
        #expect(configuration.logLevel == .debug)
    }

    @Test("invalid values are refused with the key and the allowed values")
    func invalid() throws {
        let level = #expect(throws: BatonConfiguration.Error.self) { try configuration(["log.level": "loud"]) }
        #expect(level?.description.contains("LOG_LEVEL") == true)
        let format = #expect(throws: BatonConfiguration.Error.self) { try configuration(["log.format": "xml"]) }
        #expect(format?.description.contains("json or logfmt") == true)
        // Each names its key and its variable, as docs/operations.md promises.
        for (key, value, variable) in [
            ("http.port", 70000, "HTTP_PORT"), ("database.pool.size", 0, "DATABASE_POOL_SIZE"), ("http.body.limit", 10, "HTTP_BODY_LIMIT"),
        ] {
            let refused = #expect(throws: BatonConfiguration.Error.self) { try configuration([AbsoluteConfigKey(key.split(separator: ".").map(String.init)): .init(integerLiteral: value)]) }
            #expect(refused?.description.contains("\(key) (\(variable))") == true, "\(refused?.description ?? "")")
        }
        // An idle timeout within the request's deadline would close a stalled upload before its 408.
        let idle = #expect(throws: BatonConfiguration.Error.self) { try configuration(["http.idle.timeout": 10.0]) }
        #expect(idle?.description.contains("http.request.timeout") == true)
    }

    @Test("a number or a switch set to something else is refused with the key, its variable and the value, not replaced by the default")
    func unconvertible() async throws {
        let cases = [
            ("DATABASE_POOL_SIZE", "ten", "database.pool.size (DATABASE_POOL_SIZE) must be a whole number; got \"ten\""),
            ("HTTP_PORT", "80a", "http.port (HTTP_PORT) must be a whole number"),
            ("HTTP_REQUEST_TIMEOUT", "5s", "http.request.timeout (HTTP_REQUEST_TIMEOUT) must be a number; got \"5s\""),
            ("BATON_DIAGNOSTICS", "on", "baton.diagnostics (BATON_DIAGNOSTICS) must be true or false; got \"on\""),
            ("BATON_JWT_MAX_LIFETIME", "1 day", "baton.jwt.max.lifetime (BATON_JWT_MAX_LIFETIME) must be a number"),
        ]
        for (variable, value, message) in cases {
            let reader = ConfigReader(provider: EnvironmentVariablesProvider(environmentVariables: [variable: value]))
            let error = #expect(throws: BatonConfiguration.Error.self, "\(variable)=\(value)") { try BatonConfiguration(reader: reader) }
            #expect(error?.description.contains(message) == true, "\(error?.description ?? "")")
        }
        // Unset or blank is the default; numbers and switches written as text in a file still read.
        let blank = ConfigReader(provider: EnvironmentVariablesProvider(environmentVariables: ["DATABASE_POOL_SIZE": "", "BATON_DIAGNOSTICS": " "]))
        #expect(try BatonConfiguration(reader: blank).poolSize == 10)
        // A line end carried over from an env file is not part of the value.
        let carried = ConfigReader(provider: EnvironmentVariablesProvider(environmentVariables: ["HTTP_PORT": "8081\r\n"]))
        #expect(try BatonConfiguration(reader: carried).httpPort == 8081)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("baton-\(UUID().uuidString).yaml")
        defer { try? FileManager.default.removeItem(at: file) }
        try "database:\n  pool:\n    size: \"12\"\n    timeout: ~\nbaton:\n  diagnostics: \"yes\"\n".write(to: file, atomically: true, encoding: .utf8)
        let configuration = try BatonConfiguration(reader: try await BatonConfiguration.reader(flags: [:], configFile: file.path))
        #expect(configuration.poolSize == 12)
        #expect(configuration.poolTimeout == .seconds(5), "YAML's null is unset")
        #expect(configuration.diagnostics)
        // A decimal where a whole number belongs, in a JSON file: no text form, still refused.
        let json = FileManager.default.temporaryDirectory.appendingPathComponent("baton-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: json) }
        try #"{"database": {"pool": {"size": 10.5}}}"#.write(to: json, atomically: true, encoding: .utf8)
        let decimal = try await BatonConfiguration.reader(flags: [:], configFile: json.path)
        let error = #expect(throws: BatonConfiguration.Error.self) { try BatonConfiguration(reader: decimal) }
        #expect(error?.description.contains("database.pool.size (DATABASE_POOL_SIZE) must be a whole number; got 10.5") == true, "\(error?.description ?? "")")
        // The pool timeout is range-checked like every other duration (NaN used to trap).
        let nan = ConfigReader(provider: EnvironmentVariablesProvider(environmentVariables: ["DATABASE_POOL_TIMEOUT": "nan"]))
        #expect(throws: BatonConfiguration.Error.self) { try BatonConfiguration(reader: nan) }
    }

    @Test("a missing config file is an error, not silently ignored")
    func missingFile() async throws {
        await #expect(throws: BatonConfiguration.Error.self) {
            _ = try await BatonConfiguration.reader(flags: [:], configFile: "/nonexistent/baton.yaml")
        }
    }

    @Test("development secrets: refused on a non-loopback host unless baton.dev; fine on loopback; own secrets fine anywhere")
    func developmentSecrets() throws {
        let devJWT: [AbsoluteConfigKey: ConfigValue] = ["baton.jwt.hs256.secret": .init(.string(BearerAuthenticator.developmentSecret), isSecret: true)]
        let devSigning: [AbsoluteConfigKey: ConfigValue] = [
            "baton.signing.keys": .init(.string("own:" + Data(repeating: 7, count: 32).base64EncodedString() + ",dev:ZGV2ZWxvcG1lbnQtc2lnbmluZy1rZXktbm90LWZvci1wcm9kdWN0aW9u"), isSecret: true)
        ]
        let wide: [AbsoluteConfigKey: ConfigValue] = ["http.host": "0.0.0.0"]
        #expect(DevelopmentSecrets.inUse(try configuration(devJWT)) == ["BATON_JWT_HS256_SECRET"])
        #expect(DevelopmentSecrets.inUse(try configuration(devSigning)) == ["BATON_SIGNING_KEYS"])
        for values in [devJWT, devSigning] {
            try DevelopmentSecrets.check(try configuration(values))
            #expect(throws: BatonConfiguration.Error.self) { try DevelopmentSecrets.check(try configuration(values.merging(wide) { $1 })) }
            try DevelopmentSecrets.check(try configuration(values.merging(wide) { $1 }.merging(["baton.dev": true]) { $1 }))
        }
        do {
            try DevelopmentSecrets.check(try configuration(devJWT.merging(devSigning) { $1 }.merging(["http.host": "10.0.0.5"]) { $1 }))
            Issue.record("accepted")
        } catch let error as BatonConfiguration.Error {
            #expect(error.description.hasPrefix("BATON_JWT_HS256_SECRET and BATON_SIGNING_KEYS are the public development values"))
            #expect(error.description.contains("is 10.0.0.5"))
        }
        let own: [AbsoluteConfigKey: ConfigValue] = ["baton.jwt.hs256.secret": .init(.string("our-own-secret-0123456789"), isSecret: true)]
        try DevelopmentSecrets.check(try configuration(own.merging(wide) { $1 }))
    }

    @Test("Migrations/ is found in the working directory, beside the binary, under <prefix>/share/baton, or in the package")
    func migrationsLocation() throws {
        let fm = FileManager.default
        let root = fm.temporaryDirectory.appendingPathComponent("migrations-location-\(UUID().uuidString)")
        defer { try? fm.removeItem(at: root) }
        let work = root.appendingPathComponent("work"), prefix = root.appendingPathComponent("prefix")
        let package = root.appendingPathComponent("package")
        for directory in [work, prefix.appendingPathComponent("bin"), package] {
            try fm.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        let executable = prefix.appendingPathComponent("bin/baton")
        func found() -> String {
            MigrationsLocation.find(in: MigrationsLocation.candidates(workingDirectory: work, executable: executable, package: package))
        }
        #expect(found() == "Migrations", "nothing anywhere: the conventional relative name, as before")
        try fm.createDirectory(at: package.appendingPathComponent("Migrations"), withIntermediateDirectories: true)
        #expect(found() == package.appendingPathComponent("Migrations").path)
        try fm.createDirectory(at: prefix.appendingPathComponent("share/baton/Migrations"), withIntermediateDirectories: true)
        #expect(found() == prefix.appendingPathComponent("share/baton/Migrations").path)
        try fm.createDirectory(at: prefix.appendingPathComponent("bin/Migrations"), withIntermediateDirectories: true)
        #expect(found() == prefix.appendingPathComponent("bin/Migrations").path)
        try fm.createDirectory(at: work.appendingPathComponent("Migrations"), withIntermediateDirectories: true)
        #expect(found() == work.appendingPathComponent("Migrations").path)

        // An explicit setting wins over every place looked at.
        let configured = try configuration([AbsoluteConfigKey(["baton", "migrations", "dir"]): ConfigValue(.string("/elsewhere"), isSecret: false)])
        #expect(configured.migrationsDirectory == "/elsewhere")
        // Unset, the tests (run from the package) find the package's own.
        #expect(try configuration([:]).migrationsDirectory.hasSuffix("Migrations"))
    }
}

@Suite("Log lines")
struct LogLineTests {
    let date = Date(timeIntervalSince1970: 1_700_000_000.5)

    @Test("JSON lines are single-line JSON objects with ts, level, msg and metadata")
    func json() throws {
        let line = BatonLogHandler.render(
            format: .json, timestamp: date, level: .warning, label: "baton", message: "line one\nline \"two\"",
            metadata: ["request_id": "abc", "count": .stringConvertible(3)])
        #expect(!line.contains("\n"))
        #expect(line.hasPrefix(#"{"ts":"2023-11-14T22:13:20.500Z","level":"warning","logger":"baton","msg":"line one\nline \"two\"""#))
        #expect(line.contains(#""count":"3""#))
        #expect(line.contains(#""request_id":"abc""#))
    }

    @Test("logfmt quotes and escapes values so one event stays one line")
    func logfmt() throws {
        let line = BatonLogHandler.render(
            format: .logfmt, timestamp: date, level: .info, label: "baton", message: "hello world",
            metadata: ["path": "/a b", "evil": "x\ny=1", "plain": "ok"])
        #expect(line == #"ts=2023-11-14T22:13:20.500Z level=info logger=baton msg="hello world" evil="x\ny=1" path="/a b" plain=ok"#)
    }
}
