import BatonFlows

extension DeepLinkAllowlist {
    /// The keys each mapping of the file accepts.
    public enum Keys {
        public static let file: Set<String> = ["links", "outbound"]
        public static let entry: Set<String> = ["description", "urls", "path", "query", "platforms", "flow", "screen", "params"]
        public static let parameter: Set<String> = ["required", "pattern", "maxLength"]
        public static let outboundRule: Set<String> = ["hosts", "ports", "pattern"]
    }

    /// A parameter without `maxLength` may be at most this many bytes.
    public static let defaultMaxLength = 64

    /// Schemes no `openUrl` may use whatever the file says: they run code or read local data
    /// instead of opening something.
    public static let forbiddenOutboundSchemes: Set<String> = ["javascript", "vbscript", "data", "file", "blob", "about", "filesystem"]

    /// Reads the allowlist from the text of `Flows/deeplinks.yaml`. Every problem comes back with
    /// its position; the allowlist comes back only when there is no error, so a half-read list
    /// never decides anything.
    public static func load(source: String, file: String) -> (DeepLinkAllowlist?, [Diagnostic]) {
        switch YAMLSource.parse(source, file: file) {
        case .failure(let diagnostic):
            return (nil, [diagnostic])
        case .success(let root):
            var reader = AllowlistReader()
            let allowlist = reader.allowlist(root)
            let diagnostics = reader.diagnostics.ordered
            return (diagnostics.hasErrors ? nil : allowlist, diagnostics)
        }
    }
}

/// The reading pass over the parsed YAML: shapes, names, patterns, and entries that could
/// never be reached.
struct AllowlistReader: ShapeReader {
    var diagnostics: [Diagnostic] = []

    mutating func error(_ message: String, _ location: SourceLocation) {
        diagnostics.append(.error(message, at: location))
    }

    mutating func allowlist(_ root: SourceNode) -> DeepLinkAllowlist {
        _ = pairs(root, allowed: DeepLinkAllowlist.Keys.file, what: "the allowlist file")
        var entries: [DeepLinkEntry] = []
        if let links = root["links"] {
            if case .mapping(let items, _) = links {
                entries = items.compactMap { entry($0.key, $0.value) }
            } else {
                error("links must be a mapping of entry names to entries", links.location)
            }
        }
        checkReachable(entries)
        var outbound: [OutboundRule] = []
        if let rules = root["outbound"] {
            if case .mapping(let items, _) = rules {
                outbound = items.compactMap { outboundRule($0.key, $0.value) }
            } else {
                error("outbound must be a mapping of schemes to rules", rules.location)
            }
        }
        return DeepLinkAllowlist(entries: entries, outbound: outbound)
    }

    // MARK: Entries

    private mutating func entry(_ key: SourceScalar, _ node: SourceNode) -> DeepLinkEntry? {
        let what = "entry '\(key.text)'"
        if !Self.isName(key.text) {
            error("entry name '\(key.text)' must be lowercase letters, digits, '-' or '_', starting with a letter", key.location)
        }
        _ = pairs(node, allowed: DeepLinkAllowlist.Keys.entry, what: what)
        guard case .mapping = node else { return nil }
        var complete = true

        var urls: [LinkPattern] = []
        if let urlsNode = node["urls"], case .sequence(let items, _) = urlsNode, !items.isEmpty {
            for item in items {
                guard let scalar = text(item, "a url") else { continue }
                if let pattern = linkPattern(scalar) { urls.append(pattern) } else { complete = false }
            }
        } else {
            error("\(what) needs urls: a list of URL patterns such as exampleapp://host/path/{id}", node["urls"]?.location ?? key.location)
            complete = false
        }
        if let first = urls.first {
            for other in urls.dropFirst() where Set(other.parameterNames) != Set(first.parameterNames) {
                error("every url of \(what) must have the same {parameters} as '\(first.text)'", other.location)
                complete = false
            }
        }

        let pathParameters = parameters(node["path"], inPath: true, what: what)
        let queryParameters = parameters(node["query"], inPath: false, what: what)
        let declared = Set(urls.flatMap(\.parameterNames))
        for parameter in pathParameters where !declared.contains(parameter.name) {
            error("path parameter '\(parameter.name)' is not a {segment} of any url of \(what)", parameter.location)
        }
        for name in declared.sorted() where !pathParameters.contains(where: { $0.name == name }) {
            error("{\(name)} needs a rule under path: (\(name): { pattern: ... })", urls.first { $0.parameterNames.contains(name) }!.location)
            complete = false
        }
        for parameter in queryParameters where declared.contains(parameter.name) {
            error("'\(parameter.name)' is both a path and a query parameter of \(what)", parameter.location)
        }

        let platforms = platforms(node["platforms"], what: what, at: key.location)
        if platforms.isEmpty { complete = false }

        let target: (DeepLinkTarget, SourceLocation)?
        switch (text(node["flow"], "flow"), text(node["screen"], "screen")) {
        case (let flow?, nil):
            target = name(flow, kind: "flow").map { (.flow($0), flow.location) }
        case (nil, let screen?):
            target = name(screen, kind: "screen").map { (.screen($0), screen.location) }
        case (_?, let screen?):
            error("\(what) leads to a flow or a screen, not both", screen.location)
            target = nil
        case (nil, nil):
            if node["flow"] == nil, node["screen"] == nil { error("\(what) needs flow: <name> or screen: <name>", key.location) }
            target = nil
        }

        let linkParameters = pathParameters + queryParameters
        var mapping: [ParameterMapping] = []
        if let paramsNode = node["params"] {
            var mappingSound = true
            if case .mapping(let items, _) = paramsNode {
                for (targetName, value) in items {
                    guard let linkName = text(value, "the link parameter for '\(targetName.text)'") else { continue }
                    if !Self.isParameterName(targetName.text) {
                        error("parameter name '\(targetName.text)' must be letters, digits or '_'", targetName.location)
                    }
                    guard linkParameters.contains(where: { $0.name == linkName.text }) else {
                        let known = linkParameters.map(\.name)
                        let hint = Suggest.closest(linkName.text, in: known).map { "; did you mean '\($0)'?" }
                            ?? (known.isEmpty ? "; the entry has none" : "; it has \(known.joined(separator: ", "))")
                        error("'\(linkName.text)' is not a parameter of \(what)\(hint)", linkName.location)
                        mappingSound = false
                        continue
                    }
                    mapping.append(ParameterMapping(targetParameter: targetName.text, linkParameter: linkName.text, location: targetName.location))
                }
                // Only once the mapping itself is sound: a misspelt name would be reported twice.
                for parameter in linkParameters where mappingSound && !mapping.contains(where: { $0.linkParameter == parameter.name }) {
                    diagnostics.append(.warning("link parameter '\(parameter.name)' is accepted but passed to nothing under params:", at: parameter.location))
                }
            } else {
                error("params must map the target's parameter names to link parameter names", paramsNode.location)
            }
        } else {
            mapping = linkParameters.map { ParameterMapping(targetParameter: $0.name, linkParameter: $0.name, location: $0.location) }
        }

        guard complete, let target else { return nil }
        return DeepLinkEntry(
            name: key.text, urls: urls, pathParameters: pathParameters, queryParameters: queryParameters, platforms: platforms,
            target: target.0, parameterMap: mapping, location: key.location, targetLocation: target.1)
    }

    /// Reads `scheme://host[:port]/path/{name}` by the same strict rules as incoming links
    /// (with each `{name}` standing in for one segment), so that a pattern can only describe
    /// URLs that could pass them.
    private mutating func linkPattern(_ scalar: SourceScalar) -> LinkPattern? {
        let text = scalar.text
        if text.contains("?") || text.contains("#") {
            error("a url pattern has no query or fragment; list query parameters under query:", scalar.location)
            return nil
        }
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else {
            error("'\(text)' is not scheme://host/path; deep links always have a host", scalar.location)
            return nil
        }
        let authorityStart = text.index(colon, offsetBy: 3)
        let afterAuthority = text[authorityStart...].firstIndex(of: "/") ?? text.endIndex
        var names: [Int: String] = [:]
        var standIn = String(text[..<afterAuthority])
        let pathSegments = text[afterAuthority...].split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for (index, segment) in pathSegments.enumerated() {
            standIn += "/"
            if segment.first == "{", segment.last == "}" {
                let name = String(segment.dropFirst().dropLast())
                guard Self.isParameterName(name) else {
                    error("'{\(name)}' in '\(text)': parameter names are letters, digits or '_', starting with a letter", scalar.location)
                    return nil
                }
                guard !names.values.contains(name) else {
                    error("'{\(name)}' appears twice in '\(text)'", scalar.location)
                    return nil
                }
                names[index] = name
                standIn += "x"
            } else if segment.contains("{") || segment.contains("}") {
                error("in '\(text)', a {parameter} must be a whole path segment", scalar.location)
                return nil
            } else {
                standIn += segment
            }
        }
        let url: StrictURL
        do {
            url = try StrictURL(parsing: standIn)
        } catch {
            self.error("the url pattern '\(text)' is not a strict URL: \(error.detail)", scalar.location)
            return nil
        }
        guard let host = url.host else {
            error("'\(text)' has no host", scalar.location)
            return nil
        }
        if host != String(text[authorityStart...].prefix { $0 != "/" && $0 != ":" }) {
            error("write the host of '\(text)' in lowercase ('\(host)')", scalar.location)
            return nil
        }
        let segments: [LinkPattern.Segment] = url.pathSegments.enumerated().map { index, segment in
            names[index].map(LinkPattern.Segment.parameter) ?? .literal(segment)
        }
        return LinkPattern(
            scheme: url.scheme, host: host, port: url.hasDefaultPort ? nil : url.port, segments: segments, text: text,
            location: scalar.location)
    }

    private mutating func parameters(_ node: SourceNode?, inPath: Bool, what: String) -> [LinkParameter] {
        guard let node else { return [] }
        guard case .mapping(let items, _) = node else {
            error("\(inPath ? "path" : "query") must be a mapping of parameter names to { pattern, maxLength }", node.location)
            return []
        }
        var result: [LinkParameter] = []
        for (key, value) in items {
            let parameterWhat = "\(inPath ? "path" : "query") parameter '\(key.text)' of \(what)"
            let validName = inPath ? Self.isParameterName(key.text) : Self.isQueryName(key.text)
            if !validName {
                error("\(parameterWhat): names are letters, digits or '_'\(inPath ? "" : " ('-' and '.' too)")", key.location)
            }
            _ = pairs(value, allowed: DeepLinkAllowlist.Keys.parameter, what: parameterWhat)
            guard case .mapping = value else { continue }
            var required = true
            if let requiredNode = value["required"] {
                if inPath {
                    error("path parameters are always required", requiredNode.location)
                } else if let flag = bool(requiredNode, "required") {
                    required = flag
                }
            }
            // A parameter with a missing or broken pattern is still recorded, so that the
            // entry's other checks do not report it as unknown too (the file fails anyway).
            var patternText = ""
            if let patternNode = value["pattern"] {
                patternText = pattern(patternNode) ?? ""
            } else {
                error("\(parameterWhat) needs pattern: a regular expression its whole value must match", key.location)
            }
            var maxLength = DeepLinkAllowlist.defaultMaxLength
            if let maxLengthNode = value["maxLength"], let number = int(maxLengthNode, "maxLength", minimum: 1) { maxLength = number }
            if validName {
                result.append(LinkParameter(name: key.text, required: required, pattern: patternText, maxLength: maxLength, location: key.location))
            }
        }
        return result
    }

    private mutating func platforms(_ node: SourceNode?, what: String, at location: SourceLocation) -> Set<DeepLinkPlatform> {
        guard let node else {
            let all = DeepLinkPlatform.allCases.map(\.rawValue).joined(separator: ", ")
            error("\(what) needs platforms: a list from \(all)", location)
            return []
        }
        guard case .sequence(let items, _) = node, !items.isEmpty else {
            error("platforms must be a non-empty list such as [ios, android]", node.location)
            return []
        }
        var platforms: Set<DeepLinkPlatform> = []
        for item in items {
            guard let scalar = text(item, "a platform") else { continue }
            guard let platform = DeepLinkPlatform(rawValue: scalar.text) else {
                let names = DeepLinkPlatform.allCases.map(\.rawValue)
                let hint = Suggest.closest(scalar.text, in: names).map { "; did you mean '\($0)'?" } ?? ""
                error("unknown platform '\(scalar.text)'\(hint) (platforms: \(names.joined(separator: ", ")))", scalar.location)
                continue
            }
            if !platforms.insert(platform).inserted {
                error("platform '\(scalar.text)' is listed twice", scalar.location)
            }
        }
        return platforms
    }

    /// An entry whose URL pattern an earlier pattern already covers (same scheme, host and
    /// port; every segment equal or taken by an earlier `{parameter}`) would never be chosen,
    /// whatever its platforms: the first fitting pattern decides.
    private mutating func checkReachable(_ entries: [DeepLinkEntry]) {
        var earlier: [(entry: String, pattern: LinkPattern)] = []
        for entry in entries {
            for pattern in entry.urls {
                if let covering = earlier.first(where: { Self.covers($0.pattern, pattern) }) {
                    let which = covering.entry == entry.name ? "another url of this entry" : "entry '\(covering.entry)'"
                    error("'\(pattern.text)' can never be chosen: '\(covering.pattern.text)' (\(which)) comes first and takes every link it would", pattern.location)
                }
                earlier.append((entry.name, pattern))
            }
        }
    }

    static func covers(_ a: LinkPattern, _ b: LinkPattern) -> Bool {
        guard a.scheme == b.scheme, a.host == b.host, a.port == b.port, a.segments.count == b.segments.count else { return false }
        return zip(a.segments, b.segments).allSatisfy { first, second in
            if case .parameter = first { return true }
            return first == second
        }
    }

    // MARK: Outbound

    private mutating func outboundRule(_ key: SourceScalar, _ node: SourceNode) -> OutboundRule? {
        let scheme = key.text
        let what = "outbound rule '\(scheme)'"
        guard StrictURL.isScheme(scheme) else {
            error("'\(scheme)' is not a scheme (lowercase letters, digits, '+', '-', '.', starting with a letter)", key.location)
            return nil
        }
        if DeepLinkAllowlist.forbiddenOutboundSchemes.contains(scheme) {
            error("\(scheme): URLs are never allowed as openUrl targets", key.location)
            return nil
        }
        if scheme == "http" {
            diagnostics.append(.warning("http: links leave the app unencrypted; prefer https", at: key.location))
        }
        // `tel:` alone (an empty value) allows the whole scheme.
        if case .scalar(let scalar) = node, scalar.text.isEmpty {
            if StrictURL.hierarchicalSchemes.contains(scheme) {
                error("\(what) must list its hosts (hosts: [app.example.com])", key.location)
                return nil
            }
            return OutboundRule(scheme: scheme, hosts: [], ports: [], pattern: nil, location: key.location)
        }
        _ = pairs(node, allowed: DeepLinkAllowlist.Keys.outboundRule, what: what)
        guard case .mapping = node else { return nil }
        var hosts: [String] = []
        if let hostsNode = node["hosts"] {
            if case .sequence(let items, _) = hostsNode, !items.isEmpty {
                for item in items {
                    guard let host = text(item, "a host") else { continue }
                    // The same rules as a link's host, and written exactly as they leave it.
                    switch StrictURL.parse("\(scheme)://\(host.text)/") {
                    case .success(let url) where url.host == host.text && url.port == nil:
                        if hosts.contains(host.text) { error("host '\(host.text)' is listed twice", host.location) }
                        hosts.append(host.text)
                    case .success:
                        error("'\(host.text)' must be a plain lowercase ASCII host name (no port, path or uppercase)", host.location)
                    case .failure(let rejection):
                        error("'\(host.text)' is not a plain lowercase ASCII host name: \(rejection.detail)", host.location)
                    }
                }
            } else {
                error("hosts must be a non-empty list of host names", hostsNode.location)
            }
        } else if StrictURL.hierarchicalSchemes.contains(scheme) {
            error("\(what) must list its hosts (hosts: [app.example.com])", key.location)
        }
        var ports: Set<Int> = []
        if let portsNode = node["ports"] {
            if case .sequence(let items, _) = portsNode {
                for item in items {
                    if let port = int(item, "a port", minimum: 1) {
                        if port > 65535 { error("a port is at most 65535", item.location) } else { ports.insert(port) }
                    }
                }
            } else {
                error("ports must be a list of port numbers", portsNode.location)
            }
            if node["hosts"] == nil { error("ports only apply together with hosts", portsNode.location) }
        }
        var patternText: String?
        if let patternNode = node["pattern"] {
            patternText = pattern(patternNode)
            if node["hosts"] != nil {
                error("\(what): pattern is for opaque URLs (tel:, mailto:) and hosts for scheme://host URLs; choose one", patternNode.location)
            }
        }
        return OutboundRule(scheme: scheme, hosts: hosts, ports: ports, pattern: patternText, location: key.location)
    }

    // MARK: Shapes (the rest come from ShapeReader)

    private mutating func pattern(_ node: SourceNode) -> String? {
        guard let scalar = text(node, "pattern") else { return nil }
        guard !scalar.text.isEmpty else {
            error("pattern is empty", scalar.location)
            return nil
        }
        do {
            _ = try Regex(scalar.text)
        } catch {
            self.error("pattern '\(scalar.text)' is not a valid regular expression: \(error)", scalar.location)
            return nil
        }
        return scalar.text
    }

    private mutating func name(_ scalar: SourceScalar, kind: String) -> String? {
        guard Self.isName(scalar.text) else {
            error("\(kind) name '\(scalar.text)' must be lowercase letters, digits, '-' or '_', starting with a letter", scalar.location)
            return nil
        }
        return scalar.text
    }

    // MARK: Names

    static func isName(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, text.unicodeScalars.count <= 64, ("a"..."z").contains(first) else { return false }
        return text.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "_" }
    }

    static func isParameterName(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, text.unicodeScalars.count <= 64,
            ("a"..."z").contains(first) || ("A"..."Z").contains(first)
        else { return false }
        return text.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
    }

    /// What ``StrictURL`` accepts as a query parameter name.
    static func isQueryName(_ text: String) -> Bool {
        !text.isEmpty && text.unicodeScalars.count <= 64
            && text.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "-" || $0 == "."
            }
    }
}
