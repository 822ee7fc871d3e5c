import BatonFlows
import BatonJSON
import Synchronization

/// Screens as last rendered, signed and fitted for one kind of request, with holes where their
/// start payloads go: a screen asked for again (the same user reopening or refreshing it, or
/// coming back to it after a flow that did not change it) whose loaders return the same data
/// is answered by signing fresh payloads into the held bytes instead of rendering, minting and
/// fitting it again: that work's share of a screen's profile falls from 27 % to 13 %
/// (docs/benchmarks.md, "Fitted screens held"). A screen whose data a command changed is
/// rendered: its data differs.
///
/// The loaders always run: only what is computed from their result is reused, and only when
/// the result — the template's whole scope (parameters, subject, data), encoded — is byte for
/// byte what the held screen was rendered from (``TemplateScope/encoded``; a scope holding a
/// number that is not finite has no encoding and is never held). Templates read
/// nothing else (no clock, no randomness), so the rendered tree is the same; the rest of what
/// the bytes depend on is the key:
/// - the screen's name and parameters (the release is implicit: a cache belongs to one
///   ``ServedFlows`` and goes with it);
/// - the user and the device (which flows the client may start, and as whom);
/// - the client's profile (what the fitter keeps and how it falls back);
/// - the start payloads' expiry, which moves on the hour.
///
/// Each answer's start payloads are minted afresh — a new nonce, the subject of this request,
/// signed now — so no two answers share a payload, exactly as before. The fit's report is
/// published for every answer, so fallback counts and blocked-URL logs do not change.
final class ScreenCache: Sendable {
    /// What a held screen was made for (besides its scope, compared on lookup).
    struct Key: Hashable, Sendable {
        var screen: String
        var parameters: JSONObject
        var user: String?
        var device: String?
        var profile: ClientProfile
        var startExpiry: Int
        /// When the client last started a session: a held screen's start payloads may have been
        /// used since it was held.
        var latestStart: Int64
    }

    /// Where a start payload goes in a held screen, and what it is minted from (its subject and
    /// nonce are filled in per answer, through the entry's templates when they fit).
    struct Hole: Sendable {
        var offset: Int
        var claims: PayloadClaims
        var audience: FlowDefinition.Audience
    }

    /// A held screen's start payloads signed ahead but for their nonces
    /// (``PayloadSigner/StartTemplate``), one per hole, for the subject the screen was rendered
    /// for. Made at the screen's first answer, not when it is held: a template costs about
    /// what a signature does and saves more than half of one at each later answer, so a screen
    /// held and never asked for again makes none (docs/benchmarks.md, "A held screen's start
    /// payloads from templates").
    final class Templates: Sendable {
        private let made = Mutex<[PayloadSigner.StartTemplate?]?>(nil)

        init() {}

        /// The templates of `holes`, made with `signer` by the first call; later calls return
        /// those, whatever they pass (``answer(_:identity:signer:)`` checks each one fits).
        func templates(for holes: [Hole], signer: PayloadSigner) -> [PayloadSigner.StartTemplate?] {
            if let made = made.withLock({ $0 }) { return made }
            // Two first answers at once may both make them; either's are right.
            let new = holes.map { signer.startTemplate($0.claims) }
            made.withLock { if $0 == nil { $0 = new } }
            return new
        }
    }

    /// A fitted screen without its start payloads. Its ETag is the one a render would give:
    /// the ETag masks the payloads, and the subject and the expiry it hashes are in the key.
    struct Entry: Sendable {
        /// What it was rendered from, encoded (``TemplateScope/encoded``).
        var scope: [UInt8]
        /// The fitted bytes with every payload's value cut out.
        var bytes: [UInt8]
        /// Where each payload goes in ``bytes``, in order.
        let holes: [Hole]
        /// The holes' templates, once the entry has been answered (shared by its copies).
        let templates = Templates()
        var etag: String
        /// Counts the fit (metrics, blocked-URL logs): once per answer.
        var publish: @Sendable () -> Void
    }

    private let store: GenerationalCache<Key, Entry>

    /// - Parameter budget: about how many bytes of screens and their scopes to hold; 0 holds none.
    init(budget: Int) {
        // Two generations, each half the budget; the count bound only keeps the table small
        // when screens are tiny.
        store = GenerationalCache(capacity: budget > 0 ? 4096 : 0, costLimit: budget / 2)
    }

    /// What a screen request does with the cache.
    enum Lookup {
        /// Answer from this held screen.
        case held(Entry)
        /// Render, recording what the cache needs to hold the result.
        case miss(Miss)
    }

    /// The held screen for `key` if it was rendered from exactly `scope`, else what to record
    /// while rendering; nil when nothing will be held (the cache is off, or the scope has no
    /// encoding).
    func lookup(_ key: Key, scope: TemplateScope) -> Lookup? {
        guard store.capacity > 0, let encoded = scope.encoded else { return nil }
        if let entry = store.value(for: key), entry.scope == encoded { return .held(entry) }
        return .miss(Miss(key: key, scope: encoded))
    }

    /// A screen being rendered for the cache: its start payloads as they are minted
    /// (``log``), then its fitted bytes cut where they go while its ETag is computed (one pass
    /// over them, ``add(_:payload:)``); ``hold(_:etag:publish:)`` keeps the result.
    struct Miss {
        fileprivate let key: Key
        fileprivate let scope: [UInt8]
        /// Given to the encoder, which records each start payload it mints.
        let log = MintLog()
        fileprivate var bytes: [UInt8] = []
        fileprivate var holes: [Hole] = []
        /// False once a payload turns up that the log did not mint (a command action's): such a
        /// screen is not held.
        fileprivate var complete = true
        private var next = 0

        fileprivate init(key: Key, scope: [UInt8]) {
            self.key = key
            self.scope = scope
        }

        /// Makes room for the fitted bytes (before ``add(_:payload:)``).
        mutating func reserve(_ count: Int) { bytes.reserveCapacity(count) }

        /// The next chunk of the fitted bytes, and the payload after it (nil after the last).
        /// The fit keeps the minted order and may drop actions, so each payload is looked for
        /// from where the last one was found.
        mutating func add(_ chunk: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer?) {
            guard complete else { return }
            bytes.append(contentsOf: chunk)
            guard let payload else { return }
            guard let found = log.find(payload, from: next) else {
                complete = false
                return
            }
            next = found + 1
            holes.append(Hole(offset: bytes.count, claims: log.minted[found].claims, audience: log.minted[found].audience))
        }
    }

    /// Holds the screen `miss` recorded, with its ETag and its fit's count.
    func hold(_ miss: Miss, etag: String, publish: @escaping @Sendable () -> Void) {
        guard miss.complete else { return }
        let entry = Entry(scope: miss.scope, bytes: miss.bytes, holes: miss.holes, etag: etag, publish: publish)
        store.insert(entry, for: miss.key, cost: Self.cost(of: entry))
    }

    /// About what an entry occupies in memory: its two byte arrays, a few hundred bytes per
    /// hole for the claims and their parameters, its key and bookkeeping, and the allocator's
    /// share (measured: a process holding a full cache of playlist screens grew by about this
    /// much per entry; docs/benchmarks.md, "Fitted screens held"), and about 512 bytes more per
    /// hole for its template (estimated, not measured: the encoding's base64url, up to 400
    /// bytes for a playlist's actions, and a copy of the MAC's inner hash state).
    static func cost(of entry: Entry) -> Int {
        2 * (entry.bytes.count + entry.scope.count) + entry.holes.count * 1024 + 2048
    }

    /// A held screen's bytes with fresh start payloads for `identity`; nil if one of them
    /// cannot be minted for it (the caller renders instead).
    func answer(_ entry: Entry, identity: ClientIdentity, signer: PayloadSigner) -> [UInt8]? {
        var body: [UInt8] = []
        body.reserveCapacity(entry.bytes.count + entry.holes.count * 400)
        var start = 0
        let templates = entry.templates.templates(for: entry.holes, signer: signer)
        // The subject as text, made again only where the audience changes from the hole before
        // (a screen's holes are nearly always one audience's), not once per hole.
        var audience: FlowDefinition.Audience?
        var subject = ""
        for (index, hole) in entry.holes.enumerated() {
            // Made from these holes, so one per hole; a hole without one is signed from its claims.
            let template = index < templates.count ? templates[index] : nil
            if hole.audience != audience {
                guard let text = identity.subject(for: hole.audience)?.description else { return nil }
                (audience, subject) = (hole.audience, text)
            }
            body.append(contentsOf: entry.bytes[start..<hole.offset])
            start = hole.offset
            // The template was made for the subject the screen was rendered for, which the key
            // (user and device) makes this request's; checked all the same.
            if let template, template.subject == subject, signer.sign(template, into: &body) { continue }
            var claims = hole.claims
            claims.subject = subject
            claims.nonce = PayloadSigner.makeNonce()
            body.append(contentsOf: signer.sign(claims).utf8)
        }
        body.append(contentsOf: entry.bytes[start...])
        return body
    }
}

/// The start payloads a render minted, in order, with what they were minted from: the screen
/// cache finds them in the fitted bytes and cuts them out. One render's, on one thread.
final class MintLog {
    fileprivate var minted: [(payload: String, claims: PayloadClaims, audience: FlowDefinition.Audience)] = []

    func record(_ payload: String, claims: PayloadClaims, audience: FlowDefinition.Audience) {
        minted.append((payload, claims, audience))
    }

    /// Where `payload` was minted, looking from `start` on. Payloads share a long prefix (the
    /// encoded header), so the comparison starts from their end, the MAC.
    fileprivate func find(_ payload: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard start < minted.count else { return nil }
        for index in start..<minted.count {
            var candidate = minted[index].payload
            let same = candidate.withUTF8 { bytes in
                guard bytes.count == payload.count else { return false }
                var position = bytes.count
                while position > 0 {
                    position -= 1
                    if bytes[position] != payload[position] { return false }
                }
                return true
            }
            if same { return index }
        }
        return nil
    }
}
