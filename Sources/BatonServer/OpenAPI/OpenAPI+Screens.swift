import BatonContract
import BatonJSON

extension OpenAPIDocument {
    /// `GET /{version}/screens/{name}`, and every component and action of the contract as a
    /// schema, discriminated by `type` — generated from `Flows/contract.yaml`, so the two
    /// cannot disagree.
    static func screens(_ contract: ContractRegistry) -> OpenAPIContribution {
        var schemas = JSONObject()
        func fieldSchema(_ field: FieldSpec) -> JSONValue {
            switch field.type {
            case .string:
                return field.values.isEmpty ? ["type": "string"] : ["type": "string", "enum": .array(field.values.map(JSONValue.string))]
            case .url: return ["type": "string", "format": "uri"]
            case .int: return ["type": "integer"]
            case .bool: return ["type": "boolean"]
            case .action: return ref("Action")
            case .component: return ref("Component")
            case .components: return ["type": "array", "items": ref("Component")]
            case .object: return ["type": "object"]
            case .list: return ["type": "array"]
            }
        }
        var componentRefs: [JSONValue] = []
        var componentMapping = JSONObject()
        for name in contract.components.keys.sorted() {
            let spec = contract.components[name]!
            var properties: JSONObject = ["type": ["const": .string(name)], "id": ["type": "string"]]
            var required: [JSONValue] = ["type", "id"]
            for field in spec.fields.keys.sorted() {
                properties[field] = fieldSchema(spec.fields[field]!)
                if spec.fields[field]!.required { required.append(.string(field)) }
            }
            var description = "Since contract version \(spec.since)."
            if !spec.capabilities.isEmpty { description += " Needs: \(spec.capabilities.joined(separator: ", "))." }
            if let text = spec.description { description = text + " " + description }
            let schemaName = "Component_" + name
            schemas[schemaName] = [
                "type": "object", "description": .string(description), "required": .array(required), "properties": .object(properties),
            ]
            componentRefs.append(ref(schemaName))
            componentMapping[name] = .string("#/components/schemas/\(schemaName)")
        }
        schemas["Component"] = ["oneOf": .array(componentRefs), "discriminator": ["propertyName": "type", "mapping": .object(componentMapping)]]

        var actionRefs: [JSONValue] = []
        var actionMapping = JSONObject()
        for name in contract.actions.keys.sorted() {
            let spec = contract.actions[name]!
            var properties: JSONObject = ["type": ["const": .string(name)]]
            var required: [JSONValue] = ["type"]
            for field in spec.fields.keys.sorted() {
                properties[field] = fieldSchema(spec.fields[field]!)
                if spec.fields[field]!.required { required.append(.string(field)) }
            }
            let schemaName = "Action_" + name
            schemas[schemaName] = [
                "type": "object", "description": .string((spec.description ?? "") + " Since contract version \(spec.since)."),
                "required": .array(required), "properties": .object(properties),
            ]
            actionRefs.append(ref(schemaName))
            actionMapping[name] = .string("#/components/schemas/\(schemaName)")
        }
        schemas["Action"] = ["oneOf": .array(actionRefs), "discriminator": ["propertyName": "type", "mapping": .object(actionMapping)]]
        schemas["Screen"] = [
            "type": "object", "required": ["type"],
            "description": "A componentScreen, already fitted to the client's contract version and capabilities.",
            "properties": [
                "type": ["const": "componentScreen"], "id": ["type": "string"], "title": ["type": "string"],
                "header": ref("Component"),
                "sections": [
                    "type": "array",
                    "items": [
                        "type": "object", "required": ["id", "components"],
                        "properties": [
                            "id": ["type": "string"], "heading": ["type": "object", "properties": ["title": ["type": "string"]]],
                            "components": ["type": "array", "items": ref("Component")],
                        ],
                    ],
                ],
                "secondaryButtons": [
                    "type": "array",
                    "items": ["type": "object", "required": ["title", "action"], "properties": ["title": ["type": "string"], "action": ref("Action")]],
                ],
            ],
        ]
        let paths: JSONObject = [
            "/{version}/screens/{name}": [
                "get": operation(
                    id: "screen", summary: "A screen, fitted to the client. Query parameters are the screen's parameters.",
                    tags: ["screens"],
                    parameters: [
                        ["name": "version", "in": "path", "required": true, "schema": ["type": "string", "pattern": "^v[0-9]{1,5}$"]],
                        ["name": "name", "in": "path", "required": true, "schema": ["type": "string", "examples": ["home", "playlists", "playlist", "favourites", "catalog"]]],
                        ["name": "If-None-Match", "in": "header", "schema": ["type": "string"]],
                        ["name": "X-Client-Capabilities", "in": "header", "schema": ["type": "string"]],
                        ["name": "X-Device-Id", "in": "header", "schema": ["type": "string", "format": "uuid"]],
                    ],
                    responses: [
                        "200": jsonResponse(
                            "The screen. Clients below the oldest supported version get the update-required screen (also 200).",
                            ref("Screen"), headers: ["ETag": ["description": "Strong validator of the exact bytes.", "schema": ["type": "string"]]]),
                        "304": ["description": "Not modified: If-None-Match matched the current ETag."],
                        "400": errorResponse("invalid_request: a parameter is missing, repeated, unknown or malformed."),
                        "401": errorResponse("unauthenticated: the screen shows a user's own data; sign in."),
                        "404": errorResponse("not_found: no such screen, or the thing it shows does not exist."),
                        "503": errorResponse("unavailable."),
                    ])
            ]
        ]
        return OpenAPIContribution(paths: paths, schemas: schemas, tags: [["name": "screens", "description": "Server-driven screens."]])
    }
}
