import BatonFlows

extension DeepLinkAllowlist {
    /// Decides an incoming link opened on `platform` (`ios`, `android`, `web`, `appclip`,
    /// `widget`, `other`). Only the parsed components are compared, never the raw text.
    public func match(_ url: String, platform: String) -> DeepLinkDecision {
        var trace = Trace(enabled: false)
        return decide(url, platform: platform, trace: &trace)
    }

    /// Decides whether an `openUrl` action may point at `url`.
    public func outbound(_ url: String) -> OutboundDecision {
        var trace = Trace(enabled: false)
        return decideOutbound(url, trace: &trace)
    }

    /// The same decisions as ``match(_:platform:)`` and ``outbound(_:)``, with what was parsed,
    /// each URL pattern tried and why it did or did not fit: the output of
    /// `baton links check <url>`.
    public func explain(_ url: String, platform: String) -> DeepLinkExplanation {
        var trace = Trace(enabled: true)
        trace.add("url: \(url.debugDescription)")
        trace.add("platform: \(platform)")
        let decision = decide(url, platform: platform, trace: &trace)
        switch decision {
        case .allowed(let target, let parameters, let entry):
            let shown = parameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.debugDescription)" }
            trace.add("deep link: allowed by entry '\(entry)': \(target)\(shown.isEmpty ? "" : " with \(shown.joined(separator: ", "))")")
        case .rejected(let reason, let detail):
            trace.add("deep link: rejected (\(reason.label)): \(detail)")
        }
        switch decideOutbound(url, trace: &trace) {
        case .allowed:
            trace.add("as openUrl: allowed")
            return DeepLinkExplanation(decision: decision, outbound: .allowed, lines: trace.lines)
        case .blocked(let reason, let detail):
            trace.add("as openUrl: blocked (\(reason.label)): \(detail)")
            return DeepLinkExplanation(decision: decision, outbound: .blocked(reason, detail: detail), lines: trace.lines)
        }
    }

    // MARK: Incoming links

    private func decide(_ text: String, platform: String, trace: inout Trace) -> DeepLinkDecision {
        let url: StrictURL
        switch StrictURL.parse(text) {
        case .failure(let rejection):
            trace.add("parsed: refused (\(rejection.reason.label)): \(rejection.detail)")
            return .rejected(rejection.reason, detail: rejection.detail)
        case .success(let parsed):
            url = parsed
            trace.add("parsed: \(Self.summary(of: parsed))")
        }
        guard let host = url.host else {
            return .rejected(.noMatchingEntry, detail: "'\(url.scheme):' has no //host, and every deep link has one")
        }
        if url.fragment != nil {
            return .rejected(.fragment, detail: "deep links carry their data in the path and query, never in a #fragment")
        }

        var wrongPort: LinkPattern?
        for entry in entries {
            for pattern in entry.urls {
                var tried: String { "tried '\(entry.name)' \(pattern.text):" }
                guard pattern.scheme == url.scheme else {
                    trace.add("\(tried) the scheme is not \(pattern.scheme)")
                    continue
                }
                guard pattern.host == host else {
                    trace.add("\(tried) the host is not \(pattern.host)")
                    continue
                }
                guard let pathValues = Self.capture(pattern, url.pathSegments) else {
                    trace.add("\(tried) \(Self.pathMismatch(pattern, url.pathSegments))")
                    continue
                }
                guard Self.effectivePort(url.port, scheme: url.scheme) == Self.effectivePort(pattern.port, scheme: pattern.scheme) else {
                    trace.add("\(tried) scheme, host and path fit, but port \(url.port.map(String.init) ?? "(default)") is not \(pattern.port.map(String.init) ?? "the default")")
                    wrongPort = wrongPort ?? pattern
                    continue
                }
                trace.add("\(tried) scheme, host, port and path fit")
                return check(url, against: entry, pathValues: pathValues, platform: platform, trace: &trace)
            }
        }
        if let wrongPort {
            return .rejected(.badPort, detail: "port \(url.port.map(String.init) ?? "(default)") is not allowed for \(wrongPort.text)")
        }
        return .rejected(.noMatchingEntry, detail: "no entry has scheme \(url.scheme), host \(host) and path /\(url.pathSegments.joined(separator: "/"))")
    }

    private func check(
        _ url: StrictURL, against entry: DeepLinkEntry, pathValues: [String: String], platform: String, trace: inout Trace
    ) -> DeepLinkDecision {
        var allowed: String { entry.platforms.sorted().map(\.rawValue).joined(separator: ", ") }
        guard let known = DeepLinkPlatform(rawValue: platform) else {
            return .rejected(.platformNotAllowed, detail: "unknown platform '\(platform)' (entry '\(entry.name)' allows \(allowed))")
        }
        guard entry.platforms.contains(known) else {
            return .rejected(.platformNotAllowed, detail: "entry '\(entry.name)' does not open on \(platform) (only \(allowed))")
        }
        trace.add("checked '\(entry.name)': platform \(platform) is allowed (\(allowed))")

        let query = url.query ?? []
        var values = pathValues
        var seen: Set<String> = []
        for parameter in query where !seen.insert(parameter.name).inserted {
            return .rejected(.repeatedParameter, detail: "query parameter '\(parameter.name)' is given more than once")
        }
        for parameter in query {
            guard entry.queryParameters.contains(where: { $0.name == parameter.name }) else {
                let known = entry.queryParameters.map(\.name)
                return .rejected(
                    .unknownParameter,
                    detail: "entry '\(entry.name)' has no query parameter '\(parameter.name)'"
                        + (known.isEmpty ? " (it takes none)" : " (it takes \(known.joined(separator: ", ")))"))
            }
            values[parameter.name] = parameter.value
        }
        for parameter in entry.queryParameters where parameter.required && values[parameter.name] == nil {
            return .rejected(.parameterMissing, detail: "entry '\(entry.name)' needs the query parameter '\(parameter.name)'")
        }
        for parameter in entry.pathParameters + entry.queryParameters {
            guard let value = values[parameter.name] else { continue }
            if let problem = parameter.problem(with: value) {
                return .rejected(.parameterInvalid, detail: problem)
            }
            trace.add("checked '\(entry.name)': \(parameter.name)=\(value.debugDescription) matches \(parameter.pattern)")
        }
        var parameters: [String: String] = [:]
        for mapping in entry.parameterMap {
            if let value = values[mapping.linkParameter] { parameters[mapping.targetParameter] = value }
        }
        return .allowed(entry.target, parameters: parameters, entry: entry.name)
    }

    /// The `{parameter}` values of `segments` under `pattern`, percent-decoded; `nil` when the
    /// path does not fit.
    private static func capture(_ pattern: LinkPattern, _ segments: [String]) -> [String: String]? {
        guard pattern.segments.count == segments.count else { return nil }
        var values: [String: String] = [:]
        for (expected, actual) in zip(pattern.segments, segments) {
            switch expected {
            case .literal(let literal):
                guard literal == actual else { return nil }
            case .parameter(let name):
                // StrictURL has already refused segments that do not decode.
                values[name] = StrictURL.percentDecoded(actual) ?? actual
            }
        }
        return values
    }

    /// Why `segments` do not fit `pattern`, for explanations.
    private static func pathMismatch(_ pattern: LinkPattern, _ segments: [String]) -> String {
        guard pattern.segments.count == segments.count else {
            return "the path /\(segments.joined(separator: "/")) has \(segments.count) segment(s), not \(pattern.segments.count)"
        }
        for case (.literal(let literal), let actual) in zip(pattern.segments, segments) where literal != actual {
            return "the path segment '\(actual)' is not '\(literal)'"
        }
        return "the path differs"
    }

    private static func effectivePort(_ port: Int?, scheme: String) -> Int? {
        port ?? StrictURL.defaultPorts[scheme]
    }

    // MARK: Outbound

    private func decideOutbound(_ text: String, trace: inout Trace) -> OutboundDecision {
        let url: StrictURL
        switch StrictURL.parse(text) {
        case .failure(let rejection):
            // StrictURL judges a query by web rules; for mailto: the mail client's reading
            // (RFC 6068) names the problem better when it finds one.
            if text.hasPrefix("mailto:"), [.badQuery, .badPath].contains(rejection.reason),
                case .failure(let mailto) = MailtoURL.parse(text), mailto.reason != .badPath
            {
                return .blocked(mailto.reason, detail: mailto.detail)
            }
            return .blocked(rejection.reason, detail: rejection.detail)
        case .success(let parsed): url = parsed
        }
        guard let rule = outbound.first(where: { $0.scheme == url.scheme }) else {
            let schemes = outbound.map(\.scheme).joined(separator: ", ")
            return .blocked(.schemeNotAllowed, detail: "no outbound rule for '\(url.scheme):' (rules: \(schemes.isEmpty ? "none" : schemes))")
        }
        if !rule.hosts.isEmpty {
            guard let host = url.host, rule.hosts.contains(host) else {
                let hosts = rule.hosts.joined(separator: ", ")
                return .blocked(.hostNotAllowed, detail: "'\(url.scheme):' links may only go to \(hosts), not \(url.host ?? "an opaque URL")")
            }
        }
        if url.host != nil, !url.hasDefaultPort, let port = url.port, !rule.ports.contains(port) {
            return .blocked(.badPort, detail: "port \(port) is not listed for '\(url.scheme):' links")
        }
        if url.scheme == "mailto" {
            return decideMailto(url, rule: rule, trace: &trace)
        }
        if let pattern = rule.pattern {
            guard url.isOpaque else {
                return .blocked(.badPath, detail: "'\(url.scheme):' links are written \(url.scheme):<value>, without //")
            }
            guard PatternCache.wholeMatch(pattern, url.path) else {
                return .blocked(.badPath, detail: "\(url.path.debugDescription) does not match the '\(url.scheme):' rule's pattern \(pattern)")
            }
            // The pattern judges the value between the colon and any '?' or '#'; what follows them
            // reaches the app that opens the URL too (a dialer is given `+4412?p=,,*21#`), unjudged.
            guard url.query == nil, url.fragment == nil else {
                return .blocked(.badPath, detail: "'\(url.scheme):' links are the value its pattern judges, with nothing after '?' or '#'")
            }
        }
        trace.add("as openUrl: fits the '\(rule.scheme):' rule")
        return .allowed
    }

    /// The rule's pattern judges each address, not the text after the colon: a client sends to
    /// every address and reads the header fields, so those are checked one by one.
    private func decideMailto(_ url: StrictURL, rule: OutboundRule, trace: inout Trace) -> OutboundDecision {
        let mailto: MailtoURL
        switch MailtoURL.parse(url.text) {
        case .failure(let rejection): return .blocked(rejection.reason, detail: rejection.detail)
        case .success(let parsed): mailto = parsed
        }
        if let pattern = rule.pattern {
            guard !mailto.addresses.isEmpty else {
                return .blocked(.badPath, detail: "no address: the 'mailto:' rule's pattern \(pattern) needs one")
            }
            for address in mailto.addresses where !PatternCache.wholeMatch(pattern, address) {
                let which = mailto.addresses.count > 1 ? " (every one of the \(mailto.addresses.count) addresses must)" : ""
                return .blocked(.badPath, detail: "\(address.debugDescription) does not match the 'mailto:' rule's pattern \(pattern)\(which)")
            }
        }
        trace.add(
            "as openUrl: fits the 'mailto:' rule (\(mailto.addresses.count) address(es)\(mailto.subject == nil ? "" : ", subject")\(mailto.body == nil ? "" : ", body"))")
        return .allowed
    }

    // MARK: Explanations

    static func summary(of url: StrictURL) -> String {
        var parts = ["scheme \(url.scheme)"]
        if let host = url.host {
            parts.append("host \(host)")
            parts.append(url.port.map { "port \($0)" } ?? (StrictURL.defaultPorts[url.scheme] == nil ? "no port" : "default port"))
            parts.append("path /\(url.pathSegments.joined(separator: "/"))")
        } else {
            parts.append("no host (opaque), value \(url.path.debugDescription)")
        }
        if let query = url.query {
            parts.append(query.isEmpty ? "empty query" : "query " + query.map { "\($0.name)=\($0.value.debugDescription)" }.joined(separator: " "))
        }
        if let fragment = url.fragment { parts.append("fragment \(fragment.debugDescription)") }
        return parts.joined(separator: ", ")
    }
}

/// Lines for ``DeepLinkAllowlist/explain(_:platform:)``; disabled on the server's path, where
/// building them would be wasted work.
struct Trace {
    let enabled: Bool
    private(set) var lines: [String] = []

    init(enabled: Bool) { self.enabled = enabled }

    mutating func add(_ line: @autoclosure () -> String) {
        if enabled { lines.append(line()) }
    }
}
