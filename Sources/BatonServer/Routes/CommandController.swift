import BatonContract
import BatonFlows
import BatonJSON
import BatonRuntime
import Hummingbird

/// `POST /v{N}/command`: runs the command a payload names (PROTOCOL §3).
struct CommandController: Sendable {
    let runtime: FlowRuntime
    let authenticator: BearerAuthenticator
    let screens: ScreenController

    func register(on router: Router<BatonRequestContext>, catalog: RouteCatalog) {
        router.on(.post, "/:version/command", catalog: catalog) { request, context in
            let contract = try ClientContext.contractVersion(request, context: context)
            let body = try await context.body(of: request)
            let (payload, input) = try Self.parse(Array(buffer: body))
            let identity = try await ClientContext.identity(request, context: context, authenticator: authenticator)
            let profile = ClientContext.profile(request, contract: contract)
            if screens.contract.effectiveVersion(contract) == nil {
                // Too old to speak to: the answer is the update-required screen, nothing runs.
                return Response.json(
                    bytes: try await screens.updateRequiredReply(profile: profile, identity: identity), headers: [.cacheControl: "no-store"])
            }
            let reply = try await runtime.execute(payload: payload, input: input, identity: identity, profile: profile)
            var headers: HTTPFields = [.cacheControl: "no-store"]
            if reply.replayed { headers[.idempotentReplay] = "true" }
            return Response.json(bytes: reply.body, headers: headers)
        }
    }

    /// `{"payload": "…", "input": {"text"|"choice"|"barcode": "…", "choices": […]}}`.
    static func parse(_ bytes: [UInt8]) throws -> (String, CommandInput) {
        guard !bytes.isEmpty else { throw APIError.invalidJSON("the body is empty; send {\"payload\": \"…\"}") }
        let json: JSONValue
        do { json = try JSONValue.parse(bytes) } catch let error as JSONValue.ParseError {
            throw APIError.invalidJSON("the body is \(error.description)")
        }
        guard case .object(let object) = json else { throw APIError.invalidRequest("the body must be a JSON object") }
        guard let payload = object["payload"]?.stringValue, !payload.isEmpty else {
            throw APIError.invalidRequest("\"payload\" (a string) is required")
        }
        var input = CommandInput()
        if let inputValue = object["input"], !inputValue.isNull {
            guard case .object(let fields) = inputValue else { throw APIError.invalidRequest("\"input\" must be an object") }
            func text(_ key: String) throws -> String? {
                guard let value = fields[key], !value.isNull else { return nil }
                guard let string = value.stringValue else { throw APIError.invalidRequest("\"input.\(key)\" must be a string") }
                return string
            }
            input.text = try text("text")
            input.choice = try text("choice")
            input.barcode = try text("barcode")
            if let choices = fields["choices"], !choices.isNull {
                guard let items = choices.arrayValue, items.count <= 100, let strings = Optional(items.compactMap(\.stringValue)),
                    strings.count == items.count
                else {
                    throw APIError.invalidRequest("\"input.choices\" must be a list of at most 100 strings")
                }
                input.choices = strings
            }
        }
        return (payload, input)
    }
}
