import BatonJSON
import BatonPostgres
import Crypto
import ExtrasBase64
import Foundation
import Synchronization

/// What a command payload says, once its signature has been checked.
///
/// A payload is minted by the server for one action and is opaque to clients: it binds the
/// subject, the flow, the session and its step, the event, an expiry and the signing key.
/// Start payloads have no session; they carry the flow's parameters and a nonce instead: each
/// rendered start action is its own instance, so two screens (or two devices) showing the same
/// button start two sessions, while a double tap on one button finds the session it started.
public struct PayloadClaims: Sendable, Equatable {
    public var keyID: String
    public var subject: String
    public var flow: String
    public var sessionID: UUID?
    public var step: Int
    public var event: String
    /// Unix seconds after which the payload is refused.
    public var expires: Int
    public var parameters: JSONObject?
    /// A start action's instance: random per rendered action (start payloads only).
    public var nonce: String?

    public var isStart: Bool { sessionID == nil }

    public init(
        keyID: String = "", subject: String, flow: String, sessionID: UUID?, step: Int, event: String, expires: Int,
        parameters: JSONObject? = nil, nonce: String? = nil
    ) {
        self.keyID = keyID
        self.subject = subject
        self.flow = flow
        self.sessionID = sessionID
        self.step = step
        self.event = event
        self.expires = expires
        self.parameters = parameters
        self.nonce = nonce
    }

    /// The signed form: keys in a fixed order, so the same claims always give the same bytes.
    /// Written straight into the output rather than built as a JSON object first: a screen
    /// mints one of these per start action.
    var encoded: [UInt8] {
        var writer = JSONWriter(capacity: 256)
        var first = true
        writer.write(byte: UInt8(ascii: "{"))
        writer.writeKey("v", first: &first)
        writer.write(1)
        writer.writeKey("k", first: &first)
        writer.write(keyID)
        writer.writeKey("s", first: &first)
        writer.write(subject)
        writer.writeKey("f", first: &first)
        writer.write(flow)
        if let sessionID {
            writer.writeKey("i", first: &first)
            writer.write(sessionID.lowercased)
        }
        writer.writeKey("n", first: &first)
        writer.write(step)
        writer.writeKey("e", first: &first)
        writer.write(event)
        writer.writeKey("x", first: &first)
        writer.write(expires)
        if let parameters {
            writer.writeKey("p", first: &first)
            writer.write(JSONValue.object(parameters))
        }
        if let nonce {
            writer.writeKey("r", first: &first)
            writer.write(nonce)
        }
        writer.write(byte: UInt8(ascii: "}"))
        return writer.bytes()
    }

    init?(json: JSONValue) {
        guard case .object(let object) = json, object["v"] == 1, let keyID = object["k"]?.stringValue,
            let subject = object["s"]?.stringValue, let flow = object["f"]?.stringValue, let step = object["n"]?.intValue,
            let event = object["e"]?.stringValue, let expires = object["x"]?.intValue
        else { return nil }
        var sessionID: UUID?
        if let text = object["i"] {
            guard let string = text.stringValue, let uuid = UUID(canonical: string) else { return nil }
            sessionID = uuid
        }
        var parameters: JSONObject?
        if let value = object["p"] {
            guard let params = value.objectValue else { return nil }
            parameters = params
        }
        var nonce: String?
        if let value = object["r"] {
            guard let text = value.stringValue else { return nil }
            nonce = text
        }
        // Start payloads minted before nonces carried a start generation ("g"); they stay
        // valid until they expire, and their bytes still name their session.
        self.init(
            keyID: keyID, subject: subject, flow: flow, sessionID: sessionID, step: step, event: event, expires: expires,
            parameters: parameters, nonce: nonce)
    }
}

/// Signs and verifies command payloads with HMAC-SHA256. Several keys verify (rotation);
/// the first one signs. Format: `base64url(claims JSON) "." base64url(MAC)`.
public struct PayloadSigner: Sendable {
    /// Why a payload was refused.
    public enum Failure: Error, Sendable, Equatable {
        /// Not a payload at all, or altered, or signed with an unknown key.
        case invalid(String)
        /// Genuine, but past its expiry.
        case expired(PayloadClaims)
    }

    /// A configuration problem with the keys.
    public struct KeyError: Error, CustomStringConvertible, Sendable {
        public var description: String
        public init(description: String) { self.description = description }
    }

    private let keys: [MACKey]
    /// Keys for device tokens, derived from the signing keys (same ids, same rotation), so a
    /// payload MAC can never be replayed as a device token or the other way round.
    private let deviceKeys: [MACKey]

    /// A key with its HMAC state set up once: padding the key and hashing its two blocks
    /// costs as much as a short message, so each MAC starts from a copy of this state.
    private struct MACKey: Sendable {
        let id: String
        let key: SymmetricKey
        let keyed: HMACSHA256
        /// Which key this is, beyond its id (two signers may name different secrets alike).
        let identity = KeyIdentity()

        init(id: String, key: SymmetricKey) {
            self.id = id
            self.key = key
            self.keyed = key.withUnsafeBytes { HMACSHA256(key: $0) }
        }

        func authenticationCode(for bytes: [UInt8]) -> SHA256.Digest {
            bytes.withUnsafeBytes { keyed.authenticationCode(for: $0) }
        }

        /// Compares in constant time.
        func isValid(_ mac: [UInt8], for bytes: [UInt8]) -> Bool {
            HMACSHA256.equalInConstantTime(authenticationCode(for: bytes), mac)
        }
    }
    /// Payloads longer than this are refused unread.
    public static let maxLength = 4096

    public init(keys: [(id: String, secret: [UInt8])]) throws {
        guard !keys.isEmpty else { throw KeyError(description: "at least one signing key is needed") }
        // Keys are found by id: a second key with the same id would never verify anything.
        if let repeated = keys.map(\.id).enumerated().first(where: { index, id in keys[..<index].contains { $0.id == id } }) {
            throw KeyError(description: "signing key id '\(repeated.element)' is given twice; each key needs an id of its own")
        }
        for key in keys {
            guard !key.id.isEmpty, key.id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
                throw KeyError(description: "signing key id '\(key.id)' must be letters, digits, '-' or '_'")
            }
            guard key.secret.count >= 32 else {
                throw KeyError(description: "signing key '\(key.id)' is \(key.secret.count) bytes; use at least 32 random bytes")
            }
        }
        self.keys = keys.map { MACKey(id: $0.id, key: SymmetricKey(data: $0.secret)) }
        self.deviceKeys = self.keys.map { signing in
            MACKey(
                id: signing.id,
                key: SymmetricKey(data: Array(HMAC<SHA256>.authenticationCode(for: Array("baton device token v1".utf8), using: signing.key))))
        }
    }

    /// Parses `BATON_SIGNING_KEYS`: `keyid:base64secret[,keyid:base64secret...]`.
    public init(configuration: String) throws {
        var parsed: [(id: String, secret: [UInt8])] = []
        for (index, entry) in configuration.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }).enumerated() where !entry.isEmpty {
            let parts = entry.split(separator: ":", maxSplits: 1)
            guard parts.count == 2,
                // Secrets as operators write them: base64, or base64url with or without padding
                // (leniently: one spelling matters for payloads, not for a configured key).
                let secret = Data(base64Encoded: String(parts[1])).map(Array.init)
                    ?? (try? Base64.decode(bytes: parts[1].utf8, options: [.base64UrlAlphabet, .omitPaddingCharacter]))
            else {
                // Named by its place, never by its text: an entry missing its key id is all secret.
                throw KeyError(description: "BATON_SIGNING_KEYS entries look like keyid:base64secret; entry \(index + 1) does not")
            }
            parsed.append((String(parts[0]), secret))
        }
        try self.init(keys: parsed)
    }

    /// The id of the signing key.
    public var signingKeyID: String { keys[0].id }

    /// Mints a payload for `claims` with the first key.
    public func sign(_ claims: PayloadClaims) -> String {
        var claims = claims
        claims.keyID = keys[0].id
        let body = claims.encoded
        let mac = keys[0].authenticationCode(for: body)
        return mac.withUnsafeBytes { Self.joined(body, UnsafeRawBufferPointer($0)) }
    }

    // MARK: - Start payloads from a template

    /// A start payload signed ahead but for its nonce, which the claims' encoding writes last
    /// (`…,"r":"<nonce>"}`). The claims' JSON, most of its base64url and most of its MAC's hash
    /// are the same whatever the nonce, so a held screen (``ScreenCache``) mints each of its
    /// start payloads from one of these, encoding and hashing only the nonce and what follows
    /// it: the same bytes ``sign(_:)`` gives for the claims with that nonce (`PayloadSigningTests`).
    public struct StartTemplate: Sendable {
        /// The claims' subject: the caller checks it is the request's.
        public let subject: String
        /// The key that made it: a template mints with that key only.
        fileprivate let key: KeyIdentity
        /// base64url of the encoding's first bytes (a multiple of three of them: no padding).
        fileprivate let head: [UInt8]
        /// The encoding's bytes after those, up to the nonce (at most two).
        fileprivate let rest: [UInt8]
        /// The MAC's state once the encoding up to the nonce is hashed.
        fileprivate let mac: HMACSHA256.Prefixed
    }

    /// Characters in a nonce (``makeNonce()``: 12 random bytes, base64url).
    static let nonceLength = 16

    /// The template of `claims`, a start payload's (its nonce aside), with the signing key; nil
    /// if its encoding does not end with the nonce.
    public func startTemplate(_ claims: PayloadClaims) -> StartTemplate? {
        var claims = claims
        claims.keyID = keys[0].id
        claims.nonce = ""
        let encoded = claims.encoded
        let end = Array(",\"r\":\"\"}".utf8)
        guard encoded.count > end.count, encoded.suffix(end.count).elementsEqual(end) else { return nil }
        let prefix = encoded.dropLast(2)  // up to the nonce's opening quote
        let split = prefix.startIndex + prefix.count / 3 * 3
        return StartTemplate(
            subject: claims.subject, key: keys[0].identity,
            head: prefix[..<split].withUnsafeBufferPointer { input in
                [UInt8](unsafeUninitializedCapacity: Self.base64URLLength(input.count)) { $1 = Self.writeBase64URL(input, into: $0) }
            },
            rest: Array(prefix[split...]),
            mac: prefix.withUnsafeBytes { keys[0].keyed.prefixed($0) })
    }

    /// Appends the payload `template` gives with a fresh nonce to `output`. False, with
    /// nothing appended, when the signing key is not the one that made the template.
    public func sign(_ template: StartTemplate, into output: inout [UInt8]) -> Bool {
        guard template.key === keys[0].identity else { return false }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 2 + Self.nonceLength + 2) { tail -> Bool in
            // The encoding after the template's head: its rest, the nonce, `"}`.
            var count = 0
            for byte in template.rest {
                tail[count] = byte
                count += 1
            }
            count += Self.writeNonce(into: UnsafeMutableBufferPointer(rebasing: tail[count..<(count + Self.nonceLength)]))
            tail[count] = UInt8(ascii: "\"")
            tail[count + 1] = UInt8(ascii: "}")
            count += 2
            // The template's state has hashed its rest already: the nonce and `"}` remain.
            let mac = HMACSHA256.authenticationCode(
                after: template.mac, for: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: tail[template.rest.count..<count])))
            let encodedTail = UnsafeBufferPointer(rebasing: tail[..<count])
            let tailLength = Self.base64URLLength(count)
            let macLength = Self.base64URLLength(SHA256.byteCount)
            var position = output.count + template.head.count
            output.append(contentsOf: template.head)
            output.append(contentsOf: repeatElement(0, count: tailLength + 1 + macLength))
            output.withUnsafeMutableBufferPointer { out in
                position += Self.writeBase64URL(encodedTail, into: UnsafeMutableBufferPointer(rebasing: out[position...]))
                out[position] = UInt8(ascii: ".")
                mac.withUnsafeBytes { raw in
                    raw.withMemoryRebound(to: UInt8.self) {
                        _ = Self.writeBase64URL($0, into: UnsafeMutableBufferPointer(rebasing: out[(position + 1)...]))
                    }
                }
            }
            return true
        }
    }

    /// Characters base64url without padding takes for `count` bytes.
    private static func base64URLLength(_ count: Int) -> Int {
        Base64.encodedLength(bytesCount: count, options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }

    /// Writes `bytes` as base64url without padding at the start of `output` (room for
    /// ``base64URLLength(_:)`` characters); returns how many it wrote.
    private static func writeBase64URL(_ bytes: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var span = output.mutableSpan
        return Base64.encode(bytes: bytes.span, into: &span, options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }

    /// `base64url(body) "." base64url(mac)` written into one string: a screen signs one of these
    /// per start action, and two encoded strings joined by `+` cost three allocations.
    private static func joined(_ body: [UInt8], _ mac: UnsafeRawBufferPointer) -> String {
        let bodyLength = base64URLLength(body.count)
        return String(unsafeUninitializedCapacity: bodyLength + 1 + base64URLLength(mac.count)) { output in
            var written = body.withUnsafeBufferPointer { writeBase64URL($0, into: output) }
            output[written] = UInt8(ascii: ".")
            written += 1
            written += mac.withMemoryRebound(to: UInt8.self) { writeBase64URL($0, into: UnsafeMutableBufferPointer(rebasing: output[written...])) }
            return written
        }
    }

    /// Checks a payload and returns its claims.
    public func verify(_ payload: String, now: Date = Date()) -> Result<PayloadClaims, Failure> {
        guard payload.utf8.count <= Self.maxLength else { return .failure(.invalid("the payload is too long")) }
        let parts = payload.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 2, let body = Self.base64URL(decoding: parts[0]), let mac = Self.base64URL(decoding: parts[1]),
            mac.count == SHA256.byteCount
        else {
            return .failure(.invalid("the payload is not one Baton minted"))
        }
        // Read the key id before trusting anything else in the body.
        guard let unverified = try? JSONValue.parse(body), let keyID = unverified["k"]?.stringValue,
            let key = keys.first(where: { $0.id == keyID })
        else {
            return .failure(.invalid("the payload is not one Baton minted (unknown or missing key)"))
        }
        guard key.isValid(mac, for: body) else {
            return .failure(.invalid("the payload's signature does not match: it was altered or not minted here"))
        }
        guard let claims = PayloadClaims(json: unverified) else {
            return .failure(.invalid("the payload's claims are malformed"))
        }
        if Double(claims.expires) < now.timeIntervalSince1970 { return .failure(.expired(claims)) }
        return .success(claims)
    }

    // MARK: - Device tokens

    /// The token that proves a request speaks for `device` (a lowercase UUID): `keyid.mac`,
    /// issued in `X-Device-Token` the first time the device is seen.
    public func deviceToken(for device: String) -> String {
        let mac = deviceKeys[0].authenticationCode(for: Array(device.utf8))
        return deviceKeys[0].id + "." + Self.base64URL(Array(mac))
    }

    /// Whether `token` was issued for `device` with any of the keys (rotation).
    public func verifyDeviceToken(_ token: String, device: String) -> Bool {
        deviceTokenKey(token, device: device) != nil
    }

    /// What a device token is: issued for `device` with the first key (`current`), with an
    /// older key still configured (`older`: the device should be given a current one before that
    /// key goes), or neither.
    public enum DeviceTokenStanding: Sendable { case current, older, invalid }

    public func standing(ofDeviceToken token: String, device: String) -> DeviceTokenStanding {
        switch deviceTokenKey(token, device: device) {
        case nil: .invalid
        case 0?: .current
        case _?: .older
        }
    }

    /// The index of the key `token` was issued for `device` with, if any.
    private func deviceTokenKey(_ token: String, device: String) -> Int? {
        guard token.utf8.count <= 200 else { return nil }
        let parts = token.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let index = deviceKeys.firstIndex(where: { $0.id == parts[0] }),
            let mac = Self.base64URL(decoding: parts[1].utf8), mac.count == SHA256.byteCount,
            deviceKeys[index].isValid(mac, for: Array(device.utf8))
        else { return nil }
        return index
    }

    /// RFC 4648 §5 base64url without padding.
    static func base64URL(_ bytes: [UInt8]) -> String {
        Base64.encodeToString(bytes: bytes, options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }

    /// base64url without padding, strictly: one spelling per byte string. Padding, whitespace
    /// or the other alphabet refuse, and so does a last character whose unused low bits are set
    /// (the decoder takes both; a start session's id hashes the payload's text, so each spelling
    /// of one payload would start a session of its own).
    static func base64URL(decoding text: Substring.UTF8View) -> [UInt8]? {
        guard !text.contains(UInt8(ascii: "=")),
            let bytes = try? Base64.decode(bytes: text, options: [.base64UrlAlphabet, .omitPaddingCharacter])
        else { return nil }
        // 1 or 2 bytes past a whole group leave 4 or 2 bits of the last character unused.
        let unusedBits = [0, 4, 2][bytes.count % 3]
        guard unusedBits > 0, let last = text.last else { return bytes }
        guard let value = base64URLValue(last), value & ((1 << unusedBits) - 1) == 0 else { return nil }
        return bytes
    }

    /// A base64url character's 6-bit value.
    private static func base64URLValue(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }

    /// A fresh start-action nonce: 96 random bits, base64url.
    public static func makeNonce() -> String {
        String(unsafeUninitializedCapacity: nonceLength) { writeNonce(into: $0) }
    }

    /// Writes a fresh nonce (``nonceLength`` characters) at the start of `output`; returns
    /// how many characters it wrote.
    static func writeNonce(into output: UnsafeMutableBufferPointer<UInt8>) -> Int {
        precondition(output.count >= nonceLength)
        var bytes: (UInt64, UInt32) = (0, 0)
        withUnsafeMutableBytes(of: &bytes) { NonceBytes.take(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<12])) }
        return withUnsafeBytes(of: bytes) { raw in
            UnsafeRawBufferPointer(rebasing: raw[..<12]).withMemoryRebound(to: UInt8.self) { writeBase64URL($0, into: output) }
        }
    }

    /// A stable identifier derived from a payload's bytes (start payloads name their session
    /// this way, so repeats of one start find the same session).
    public static func sessionID(forStartPayload payload: String) -> UUID {
        // Hashed from the string's own bytes into a UUID's: no `Data` or array copies, each an
        // allocation on every start command (`Benchmarks/e2e/counts.sh`).
        var payload = payload
        let digest = payload.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &uuid) { target in
            digest.withUnsafeBytes { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(16))) }
            target[6] = (target[6] & 0x0F) | 0x80  // version 8: application-defined
            target[8] = (target[8] & 0x3F) | 0x80  // RFC 4122 variant
        }
        return UUID(uuid: uuid)
    }
}

/// One signing key's identity, compared by reference (``PayloadSigner/StartTemplate``).
fileprivate final class KeyIdentity: Sendable {}

/// Random bytes for start-action nonces, drawn from the system a batch at a time: one read
/// serves 21 nonces, where each nonce used to make two `getrandom(2)` calls (a screen mints
/// one per start action, and those calls showed up in `perf` under a screen's load).
///
/// The bytes are not secret — each ends up in a payload a client holds — they only have to
/// be unpredictable and used once, which the lock ensures.
enum NonceBytes {
    /// 21 nonces of 12 bytes; small enough that the read is not cut short in practice (the
    /// loop below copes if it is).
    private static let batch = 252
    private static let pool = Mutex<(bytes: [UInt8], used: Int)>((Array(repeating: 0, count: batch), batch))

    static func take(into destination: UnsafeMutableRawBufferPointer) {
        precondition(destination.count <= batch)
        pool.withLock { pool in
            if pool.used + destination.count > batch {
                pool.bytes.withUnsafeMutableBytes(fillRandom)
                pool.used = 0
            }
            pool.bytes.withUnsafeBytes { source in
                destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[pool.used..<(pool.used + destination.count)]))
            }
            pool.used += destination.count
        }
    }

    private static func fillRandom(_ buffer: UnsafeMutableRawBufferPointer) {
        #if canImport(Glibc)
        // `getrandom(2)` is not in Swift's Glibc module; a read of /dev/urandom is the same
        // source (one system call, kept open for the process).
        var filled = 0
        while urandom >= 0, filled < buffer.count {
            let result = read(urandom, buffer.baseAddress! + filled, buffer.count - filled)
            if result > 0 {
                filled += result
            } else if result == 0 || errno != EINTR {
                break
            }
        }
        // No /dev/urandom (a chroot, a sandbox): the standard library's generator.
        var generator = SystemRandomNumberGenerator()
        for index in filled..<buffer.count { buffer[index] = generator.next() }
        #else
        arc4random_buf(buffer.baseAddress!, buffer.count)
        #endif
    }

    #if canImport(Glibc)
    private static let urandom = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
    #endif
}
