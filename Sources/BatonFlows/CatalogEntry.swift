/// One thing a flow can call, as `baton flows catalog` and `docs/catalog.md` list it.
public struct CatalogEntry: Sendable {
    /// What sort of callable an entry is and how a flow uses it. A struct rather than an enum so
    /// a new kind (say, service calls declared in YAML) is one more value, not a new case every
    /// `switch` must learn.
    public struct Kind: Sendable, Hashable {
        /// Singular, as diagnostics say it: `effect`.
        public var name: String
        /// Plural, as a section heading: `Effects`.
        public var heading: String
        /// How a flow calls it and what it gives back, in a sentence or two of Markdown.
        public var usage: String
        /// What the declared fields describe (`Result fields`), or nil when the kind returns none.
        public var fieldsHeading: String?
        /// Where the kind's section goes, lowest first.
        public var order: Int

        public init(name: String, heading: String, usage: String, fieldsHeading: String?, order: Int) {
            self.name = name
            self.heading = heading
            self.usage = usage
            self.fieldsHeading = fieldsHeading
            self.order = order
        }

        public static func == (a: Kind, b: Kind) -> Bool { a.name == b.name }
        public func hash(into hasher: inout Hasher) { hasher.combine(name) }

        public static let effect = Kind(
            name: "effect", heading: "Effects",
            usage: """
                A transition's `do: <name>` (arguments under `with:`). Swift that writes to Baton's database inside the \
                command's transaction and reports one of its outcomes (map each under `outcomes:`). What it returns is \
                `{{result.<field>}}` in the states it leads to.
                """,
            fieldsHeading: "Result fields", order: 0)

        public static let `guard` = Kind(
            name: "guard", heading: "Guards",
            usage: "A transition's `guard: {name: <name>, with: …}`. A yes/no question asked first; on no, the transition goes to `else:`.",
            fieldsHeading: nil, order: 1)

        public static let loader = Kind(
            name: "loader", heading: "Loaders",
            usage: """
                A state's or screen's `load: {<key>: {from: <name>, with: …}}`, and `optionsFrom: {from: <name>}`. Reads data \
                for templates: `{{data.<key>.<field>}}`; a list loader feeds `each:` and `optionsFrom`, with `{{item.<field>}}` \
                per element.
                """,
            fieldsHeading: "Returns", order: 2)

        public static let service = Kind(
            name: "service", heading: "Services",
            usage: """
                A transition's `call: {service: <name>, method, path, query, body, timeout}`, declared in \
                `Flows/services.yaml` (a screen's `load: {<key>: {call: …, fallback: …}}` for a `GET`). Made outside the \
                command's transaction, with the service's timeouts, retries and circuit breaker; writes carry an \
                `Idempotency-Key`. The answer picks the outcome: a status (`200`), a class (`4xx`) or a failure \
                (`unavailable` for all of them); `{{result.<field>}}` is the response's JSON body. See \
                [Calling services](flows.md#calling-services).
                """,
            fieldsHeading: "Settings", order: 3)
    }

    public var kind: Kind
    /// Its name, arguments, outcomes and declared fields.
    public var signature: CallSignature

    public init(kind: Kind, signature: CallSignature) {
        self.kind = kind
        self.signature = signature
    }
}

extension CatalogEntry {
    /// The services of `services.yaml` as catalog entries: what a `call:` takes and the
    /// outcomes it can end in.
    public static func services(_ services: [String: ServiceDefinition]) -> [CatalogEntry] {
        let arguments = [
            ArgumentSpec("method", required: false), ArgumentSpec("path"), ArgumentSpec("query", .any, required: false),
            ArgumentSpec("body", .any, required: false), ArgumentSpec("timeout", required: false),
        ]
        let outcomes = ["<status>", "<class>xx"] + ServiceFailure.allCases.map(\.rawValue) + ["unavailable"]
        return services.keys.sorted().map { name in
            let service = services[name]!
            func text(_ duration: Duration) -> String {
                let ms = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
                return ms % 1000 == 0 ? "\(ms / 1000)s" : "\(ms)ms"
            }
            let auth = switch service.auth {
            case .none: "none"
            case .bearer: "bearer"
            case .hmac: "hmac"
            }
            let settings = [
                FieldSpec("\(service.isInternal ? "internal" : "external"), auth \(auth)"),
                FieldSpec("\(service.attempts) × \(text(service.attemptTimeout)) (connect \(text(service.connectTimeout)))"),
                FieldSpec("circuit \(service.circuitFailures) failures / \(text(service.circuitOpen)), \(service.concurrency) at once"),
            ]
            return CatalogEntry(
                kind: .service, signature: CallSignature(name: name, arguments: arguments, outcomes: outcomes, fields: settings))
        }
    }
}

extension FlowCatalog {
    /// Everything flows can call, grouped by kind (in ``CatalogEntry/Kind/order``) and sorted by
    /// name within a kind. A new kind of callable adds its entries here.
    public var entries: [CatalogEntry] {
        func sorted(_ signatures: [String: CallSignature], as kind: CatalogEntry.Kind) -> [CatalogEntry] {
            signatures.keys.sorted().map { CatalogEntry(kind: kind, signature: signatures[$0]!) }
        }
        let all = sorted(effects, as: .effect) + sorted(guards, as: .guard) + sorted(loaders, as: .loader)
        return all.enumerated().sorted { ($0.element.kind.order, $0.offset) < ($1.element.kind.order, $1.offset) }.map(\.element)
    }
}
