import BatonJSON
import Foundation

/// A screen template from `Flows/screens/<name>.yaml`: parameters, loaders and the component
/// tree they fill. Served at `GET /v{N}/screens/<name>` and used by flow states.
public struct ScreenTemplate: Sendable {
    public var name: String
    public var title: String?
    public var parameters: [ParameterSpec]
    public var loads: [LoaderCall]
    /// Data fetched from backend services before the loaders run (`load: {x: {call: …, fallback: …}}`).
    public var serviceLoads: [ServiceLoad] = []
    /// The `componentScreen` body (without `type`, which rendering adds).
    public var content: JSONTemplate
    /// Events of command actions (only meaningful when a flow state uses the template).
    public var events: [String]
    public var file: String
    public var location: SourceLocation

    public static let keys: Set<String> = ["screen", "title", "params", "load", "content"]

    /// Loads a template file.
    public static func load(source: String, file: String) -> (ScreenTemplate?, [Diagnostic]) {
        switch YAMLSource.parse(source, file: file) {
        case .failure(let diagnostic): return (nil, [diagnostic])
        case .success(let root):
            var reader = Reader(file: file)
            _ = reader.pairs(root, allowed: keys, what: "a screen file")
            guard case .mapping = root else { return (nil, reader.diagnostics) }
            let nameNode = reader.text(root["screen"], "screen")
            if root["screen"] == nil { reader.error("missing 'screen: <name>'", root.location) }
            let name = nameNode?.text ?? ""
            let fileName = (file as NSString).lastPathComponent
            if let nameNode, fileName != "\(name).yaml", fileName != "\(name).yml" {
                reader.error("screen '\(name)' must live in \(name).yaml (found in \(fileName))", nameNode.location)
            }
            var wrapper = SourceNode.mapping([], root.location)
            if case .mapping(let pairs, let location) = root {
                // Reuse the flow reader for params and load by presenting them as a flow state.
                wrapper = .mapping(pairs.filter { $0.key.text == "params" || $0.key.text == "load" }, location)
            }
            var parameters: [ParameterSpec] = []
            if let paramsNode = wrapper["params"] {
                if case .mapping(let pairs, _) = paramsNode {
                    for (key, value) in pairs {
                        var spec = ParameterSpec(name: key.text, required: true, pattern: nil, maxLength: 256, location: key.location)
                        if case .mapping = value {
                            _ = reader.pairs(value, allowed: FlowLoader.Keys.parameter, what: "parameter '\(key.text)'")
                            if let required = reader.bool(value["required"], "required") { spec.required = required }
                            spec.pattern = reader.pattern(value["pattern"], "pattern")
                            if let maxLength = reader.int(value["maxLength"], "maxLength", minimum: 1) { spec.maxLength = maxLength }
                        }
                        parameters.append(spec)
                    }
                } else {
                    reader.error("params must be a mapping", paramsNode.location)
                }
            }
            var loads: [LoaderCall] = []
            var serviceLoads: [ServiceLoad] = []
            if let loadNode = wrapper["load"] {
                if case .mapping(let pairs, _) = loadNode {
                    for (key, value) in pairs {
                        if let callNode = value["call"] {
                            _ = reader.pairs(value, allowed: ["call", "fallback"], what: "load '\(key.text)'")
                            if let call = reader.serviceCall(callNode) {
                                if call.isWrite { reader.error("a screen only reads: a service load must be a GET", callNode.location) }
                                let fallback = value["fallback"].map { JSONTemplate.from($0, diagnostics: &reader.diagnostics) }
                                serviceLoads.append(ServiceLoad(name: key.text, call: call, fallback: fallback, location: key.location))
                            }
                            continue
                        }
                        _ = reader.pairs(value, allowed: FlowLoader.Keys.load, what: "load '\(key.text)'")
                        if let call = reader.call(name: value["from"], with: value["with"], kind: "loader", at: key.location) {
                            loads.append(LoaderCall(name: key.text, call: call))
                        }
                    }
                } else {
                    reader.error("load must be a mapping of names to loader calls", loadNode.location)
                }
            }
            guard let contentNode = root["content"] else {
                reader.error("missing 'content:' (the screen's title, sections, …)", root.location)
                return (nil, reader.diagnostics)
            }
            guard case .mapping = contentNode else {
                reader.error("content must be a mapping", contentNode.location)
                return (nil, reader.diagnostics)
            }
            let content = JSONTemplate.from(contentNode, diagnostics: &reader.diagnostics)
            var template = ScreenTemplate(
                name: name, title: reader.text(root["title"], "title")?.text, parameters: parameters, loads: loads,
                content: content, events: ScreenEvents.commandEvents(in: content), file: file,
                location: nameNode?.location ?? root.location)
            template.serviceLoads = serviceLoads
            return (template, reader.diagnostics)
        }
    }
}

/// A screen's data from a backend service: one `GET` with a short timeout (1 s unless the call
/// says otherwise) and no retry. When it fails, `{{data.<name>}}` is the rendered `fallback`
/// (with `failure` set to the failure's name), so the template can show an error component.
public struct ServiceLoad: Sendable {
    public var name: String
    public var call: ServiceCallSpec
    public var fallback: JSONTemplate?
    public var location: SourceLocation

    /// The timeout of a screen's service load when its call names none.
    public static let defaultTimeout: Duration = .seconds(1)

    /// `data.<name>` for a call's result: the body of a 2xx, else the fallback with `failure`.
    public func value(for result: ServiceResult, scope: TemplateScope) -> JSONValue {
        if case .response(let status, let body) = result, (200..<300).contains(status) { return body }
        let failure: String
        switch result {
        case .response(let status, _): failure = "status_\(status)"
        case .failure(let kind): failure = kind.rawValue
        }
        var object = fallback?.render(scope)?.objectValue ?? [:]
        object["failure"] = .string(failure)
        return .object(object)
    }
}

/// Checks parameters against their specs: required ones present, patterns and lengths, no
/// U+0000, no undeclared ones. Returns a message for the first problem.
public enum ParameterCheck {
    public static func problem(_ values: JSONObject, specs: [ParameterSpec]) -> String? {
        // A handful of specs: searched in place, not hashed into a set on every request.
        for key in values.keys where !specs.contains(where: { $0.name == key }) {
            return "unknown parameter '\(key.prefix(64))'"
        }
        for spec in specs {
            guard let value = values[spec.name], !value.isNull else {
                if spec.required { return "parameter '\(spec.name)' is required" }
                continue
            }
            let text = value.interpolationText
            // Characters, as people count them; never more than the bytes, which cost nothing to count.
            if text.utf8.count > spec.maxLength, text.count > spec.maxLength { return "parameter '\(spec.name)' is longer than \(spec.maxLength) characters" }
            // No text column or bound parameter can hold U+0000: refused here, by name, rather
            // than failing in whichever loader or effect binds the value.
            if text.utf8.contains(0) { return "parameter '\(spec.name)' must not contain U+0000" }
            if let pattern = spec.pattern {
                guard PatternCache.wholeMatch(pattern, text) else {
                    return "parameter '\(spec.name)' does not match \(pattern)"
                }
            }
        }
        return nil
    }
}
