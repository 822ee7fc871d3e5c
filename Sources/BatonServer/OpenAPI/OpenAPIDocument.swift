import BatonJSON

/// The OpenAPI 3.1 description of Baton's HTTP API, served at `/openapi.json`. Built in code
/// beside the routes so it grows with them; a test validates it and checks that every
/// registered route is described.
public enum OpenAPIDocument {
    /// The document, given the API version string.
    public static func make(version: String, extensions: [OpenAPIContribution] = []) -> JSONValue {
        var paths: JSONObject = [
            "/healthz": [
                "get": operation(
                    id: "healthz", summary: "Liveness: the process is up.", tags: ["operations"],
                    responses: ["200": jsonResponse("The process is up.", ref("HealthStatus"))])
            ],
            "/readyz": [
                "get": operation(
                    id: "readyz", summary: "Readiness: the database answers and migrations are current.",
                    tags: ["operations"],
                    responses: [
                        "200": jsonResponse("Ready to serve.", ref("ReadyStatus")),
                        "503": errorResponse("Not ready; `error.checks` says which check failed."),
                    ])
            ],
            "/metrics": [
                "get": operation(
                    id: "metrics", summary: "Prometheus metrics in the text exposition format.", tags: ["operations"],
                    responses: [
                        "200": [
                            "description": "Prometheus text format 0.0.4.",
                            "content": ["text/plain": ["schema": ["type": "string"]]],
                        ]
                    ])
            ],
            "/openapi.json": [
                "get": operation(
                    id: "openapi", summary: "This document.", tags: ["operations"],
                    responses: [
                        "200": ["description": "OpenAPI 3.1 document.", "content": ["application/json": ["schema": ["type": "object"]]]]
                    ])
            ],
        ]
        var schemas: JSONObject = [
            "Error": [
                "type": "object",
                "description": "The envelope of every 4xx/5xx response that is not part of a flow.",
                "required": ["error"],
                "properties": [
                    "error": [
                        "type": "object",
                        "required": ["code", "message"],
                        "properties": [
                            "code": [
                                "type": "string",
                                "description": "Machine-readable; clients switch on it.",
                                "examples": [
                                    "invalid_json", "invalid_request", "invalid_payload", "payload_expired", "unauthenticated",
                                    "forbidden", "not_found", "method_not_allowed", "body_too_large", "request_timeout", "unavailable",
                                ],
                            ],
                            "message": ["type": "string", "description": "For people; never parse it."],
                        ],
                        "additionalProperties": true,
                    ]
                ],
            ],
            "HealthStatus": ["type": "object", "properties": ["status": ["type": "string", "const": "ok"]]],
            "ReadyStatus": [
                "type": "object",
                "properties": [
                    "status": ["type": "string", "const": "ready"],
                    "checks": ["type": "object", "additionalProperties": ["type": "string"]],
                ],
            ],
        ]
        var tags: [JSONValue] = [["name": "operations", "description": "Health, readiness, metrics."]]
        for contribution in extensions {
            for (path, item) in contribution.paths { paths[path] = item }
            for (name, schema) in contribution.schemas { schemas[name] = schema }
            tags += contribution.tags
        }
        return [
            "openapi": "3.1.0",
            "info": [
                "title": "Baton",
                "version": .string(version),
                "description": "Server-driven flows for native apps. The wire contract is docs/protocol.md.",
            ],
            "tags": .array(tags),
            "paths": .object(paths),
            "components": [
                "schemas": .object(schemas),
                "responses": [
                    "Error": errorResponse("An error envelope.")
                ],
            ],
        ]
    }

    // MARK: - Building blocks (used by the contributions of later layers too)

    public static func ref(_ name: String) -> JSONValue { ["$ref": .string("#/components/schemas/\(name)")] }

    public static func operation(
        id: String, summary: String, tags: [String], parameters: [JSONValue] = [], requestBody: JSONValue? = nil,
        responses: JSONObject
    ) -> JSONValue {
        var operation: JSONObject = [
            "operationId": .string(id), "summary": .string(summary), "tags": .array(tags.map(JSONValue.string)),
        ]
        if !parameters.isEmpty { operation["parameters"] = .array(parameters) }
        if let requestBody { operation["requestBody"] = requestBody }
        operation["responses"] = .object(responses)
        return .object(operation)
    }

    public static func jsonResponse(_ description: String, _ schema: JSONValue, headers: JSONObject = [:]) -> JSONValue {
        var response: JSONObject = ["description": .string(description), "content": ["application/json": ["schema": schema]]]
        if !headers.isEmpty { response["headers"] = .object(headers) }
        return .object(response)
    }

    public static func errorResponse(_ description: String) -> JSONValue {
        jsonResponse(description, ref("Error"))
    }
}

/// Paths, schemas and tags a layer adds to the document.
public struct OpenAPIContribution: Sendable {
    public var paths: JSONObject
    public var schemas: JSONObject
    public var tags: [JSONValue]

    public init(paths: JSONObject = [:], schemas: JSONObject = [:], tags: [JSONValue] = []) {
        self.paths = paths
        self.schemas = schemas
        self.tags = tags
    }
}
