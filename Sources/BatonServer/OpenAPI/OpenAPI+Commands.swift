import BatonJSON

extension OpenAPIDocument {
    /// `POST /{version}/command` and the responses a command can get (PROTOCOL §3).
    static var commands: OpenAPIContribution {
        let version: JSONValue = [
            "name": "version", "in": "path", "required": true,
            "description": "The client's contract version as v{N} (v1, v2, v3, …).",
            "schema": ["type": "string", "pattern": "^v[0-9]{1,5}$"],
        ]
        let clientHeaders: [JSONValue] = [
            ["name": "X-Client-Platform", "in": "header", "schema": ["type": "string", "examples": ["ios", "android", "web", "appclip", "widget"]]],
            ["name": "X-Client-Version", "in": "header", "schema": ["type": "string"], "description": "App version (semver); metrics only."],
            ["name": "X-Client-Capabilities", "in": "header", "schema": ["type": "string"], "description": "Comma list, e.g. barcode_scanner,nfc."],
            ["name": "X-Device-Id", "in": "header", "schema": ["type": "string", "format": "uuid"], "description": "The anonymous device (App Clip)."],
            [
                "name": "X-Device-Token", "in": "header", "schema": ["type": "string"],
                "description": "The token the server issued for X-Device-Id (response header X-Device-Token on the device's first request); required afterwards.",
            ],
        ]
        let paths: JSONObject = [
            "/{version}/command": [
                "post": operation(
                    id: "command",
                    summary: "Send a command action back: starts a flow or moves its session on. Exactly once per request (subject, payload, input).",
                    tags: ["flows"], parameters: [version] + clientHeaders,
                    requestBody: [
                        "required": true,
                        "content": ["application/json": ["schema": ref("CommandRequest")]],
                    ],
                    responses: [
                        "200": jsonResponse(
                            "The command's answer. The identical request again gets the stored answer byte for byte; the same payload with another input, or for a step already left, gets refresh with a message.",
                            ref("CommandResponse"),
                            headers: [
                                "Idempotent-Replay": [
                                    "description": "true when this is the stored answer of an earlier identical command.",
                                    "schema": ["type": "string", "const": "true"],
                                ]
                            ]),
                        "400": errorResponse("invalid_json, invalid_request or invalid_payload (tampered or not minted here)."),
                        "401": errorResponse("unauthenticated: a bad bearer token, or no identity at all."),
                        "403": errorResponse("forbidden: the payload was minted for another subject."),
                        "404": errorResponse("not_found: the flow no longer exists."),
                        "408": errorResponse(
                            "request_timeout: the body stopped arriving before the request's deadline; the connection is closed. Send the same body again."),
                        "409": errorResponse(
                            "conflict: the identical command is still waiting for a backend service's answer; retry with the same body after Retry-After seconds."),
                        "413": errorResponse("body_too_large."),
                        "429": errorResponse(
                            "rate_limited: a limit was reached (e.g. Scan & Go label lookups); Retry-After, RateLimit-Policy and RateLimit say when to try again."),
                        "503": errorResponse(
                            "unavailable: the database did not answer within the deadline, or cannot be reached; retry after Retry-After seconds with the same body (the command log answers truthfully)."),
                    ])
            ]
        ]
        let action: JSONValue = [
            "type": "object",
            "description": "What a control does when used. command/startFlow POST their payload to url.",
            "required": ["type"],
            "properties": [
                "type": ["type": "string", "examples": ["command", "startFlow", "openUrl", "navigate", "scanBarcode", "share", "close"]],
                "url": ["type": "string"],
                "payload": ["type": "string", "description": "Opaque and signed; send it back unchanged."],
                "title": ["type": "string"],
                "screen": ["type": "string"],
                "params": ["type": "object", "additionalProperties": ["type": "string"]],
            ],
            "additionalProperties": true,
        ]
        let schemas: JSONObject = [
            "Action": action,
            "CommandRequest": [
                "type": "object",
                "required": ["payload"],
                "properties": [
                    "payload": ["type": "string", "maxLength": 4096],
                    "input": [
                        "type": "object",
                        "description": "Only when answering an input request.",
                        "properties": [
                            "text": ["type": "string"], "choice": ["type": "string"], "barcode": ["type": "string"],
                            "choices": ["type": "array", "items": ["type": "string"], "maxItems": 100],
                        ],
                    ],
                ],
            ],
            "CommandResponse": [
                "oneOf": [ref("DoneResponse"), ref("RefreshResponse"), ref("InputResponse"), ref("ScreenResponse"), ref("ErrorResponse")],
                "discriminator": [
                    "propertyName": "type",
                    "mapping": [
                        "done": "#/components/schemas/DoneResponse", "refresh": "#/components/schemas/RefreshResponse",
                        "input": "#/components/schemas/InputResponse", "screen": "#/components/schemas/ScreenResponse",
                        "error": "#/components/schemas/ErrorResponse",
                    ],
                ],
            ],
            "DoneResponse": [
                "type": "object", "required": ["type"],
                "properties": [
                    "type": ["const": "done"], "message": ["type": "string"],
                    "refresh": ["oneOf": [["type": "boolean"], ["type": "array", "items": ["type": "string"]]],
                        "description": "true: refresh the screen behind; a list: refresh those section ids."],
                ],
            ],
            "RefreshResponse": [
                "type": "object", "required": ["type"],
                "properties": [
                    "type": ["const": "refresh"],
                    "message": [
                        "type": "string",
                        "description": "Set when the command was stale (its screen was out of date): nothing changed; reload the screen.",
                    ],
                ],
            ],
            "InputResponse": [
                "type": "object", "required": ["type", "title", "input", "submit"],
                "properties": [
                    "type": ["const": "input"], "title": ["type": "string"], "message": ["type": "string"],
                    "error": ["type": "string", "description": "Set when the last answer was refused; ask again."],
                    "input": [
                        "type": "object", "required": ["kind"],
                        "properties": [
                            "kind": ["enum": ["text", "choice"]], "placeholder": ["type": "string"], "value": ["type": "string"],
                            "minLength": ["type": "integer"], "maxLength": ["type": "integer"], "multiple": ["type": "boolean"],
                            "options": [
                                "type": "array",
                                "items": [
                                    "type": "object", "required": ["id", "title"],
                                    "properties": ["id": ["type": "string"], "title": ["type": "string"], "subtitle": ["type": "string"]],
                                ],
                            ],
                        ],
                    ],
                    "submit": ref("Action"), "cancel": ref("Action"),
                ],
            ],
            "ScreenResponse": [
                "type": "object", "required": ["type", "presentation", "screen"],
                "properties": [
                    "type": ["const": "screen"], "presentation": ["enum": ["push", "modal", "replace"]], "screen": ref("Screen"),
                ],
            ],
            "ErrorResponse": [
                "type": "object", "required": ["type", "message"],
                "properties": [
                    "type": ["const": "error"], "message": ["type": "string"],
                    "code": ["type": "string", "description": "payload_expired, link_not_allowed, …"], "retry": ref("Action"),
                ],
            ],
            "Screen": [
                "type": "object", "required": ["type"],
                "description": "A componentScreen; its components are described per type in Flows/contract.yaml.",
                "properties": [
                    "type": ["const": "componentScreen"], "id": ["type": "string"], "title": ["type": "string"],
                    "header": ["type": "object"], "sections": ["type": "array", "items": ["type": "object"]],
                    "secondaryButtons": ["type": "array", "items": ["type": "object"]],
                ],
            ],
        ]
        return OpenAPIContribution(
            paths: paths, schemas: schemas,
            tags: [["name": "flows", "description": "Commands: start and advance flow sessions."]])
    }
}

extension OpenAPIDocument {
    /// `/diagnostics/*`, present only when diagnostics are enabled.
    static var diagnostics: OpenAPIContribution {
        OpenAPIContribution(
            paths: [
                "/diagnostics/probe/{subject}": [
                    "post": operation(
                        id: "diagnosticsProbe", summary: "Benchmark probe: lock, update and log one row in one transaction.",
                        tags: ["diagnostics"],
                        parameters: [["name": "subject", "in": "path", "required": true, "schema": ["type": "string", "maxLength": 64]]],
                        responses: [
                            "200": jsonResponse("The row's new count.", ["type": "object"]),
                            "404": errorResponse("No such probe row."),
                        ])
                ],
                "/diagnostics/sleep": [
                    "get": operation(
                        id: "diagnosticsSleep", summary: "Answers after ?ms= milliseconds (graceful-shutdown checks).",
                        tags: ["diagnostics"],
                        parameters: [["name": "ms", "in": "query", "schema": ["type": "integer", "minimum": 0, "maximum": 10000]]],
                        responses: ["200": jsonResponse("Slept.", ["type": "object"])])
                ],
            ],
            tags: [["name": "diagnostics", "description": "Off unless BATON_DIAGNOSTICS=true."]])
    }
}

extension OpenAPIDocument {
    /// `POST /{version}/deeplinks/resolve` (PROTOCOL §4).
    static var deepLinks: OpenAPIContribution {
        OpenAPIContribution(
            paths: [
                "/{version}/deeplinks/resolve": [
                    "post": operation(
                        id: "resolveDeepLink",
                        summary: "Resolve a deep link: the first answer of its flow (started for the caller) or its screen; refused links answer error/link_not_allowed.",
                        tags: ["deep links"],
                        parameters: [
                            ["name": "version", "in": "path", "required": true, "schema": ["type": "string", "pattern": "^v[0-9]{1,5}$"]],
                            [
                                "name": "Idempotency-Key", "in": "header", "required": false,
                                "description": "One per tap (IETF httpapi draft): a retry with the same key and body gets the first reply.",
                                "schema": ["type": "string", "minLength": 1, "maxLength": 255],
                            ],
                        ],
                        requestBody: [
                            "required": true,
                            "content": [
                                "application/json": [
                                    "schema": [
                                        "type": "object", "required": ["url"],
                                        "properties": ["url": ["type": "string", "maxLength": 2048, "examples": ["exampleapp://scan-and-go?location=UT-0001"]]],
                                    ]
                                ]
                            ],
                        ],
                        responses: [
                            "200": jsonResponse(
                                "The flow's first answer, a screen, or {type: error, code: link_not_allowed, reason}.", ref("CommandResponse"),
                                headers: [
                                    "Idempotent-Replay": [
                                        "description": "true when this is the stored reply of the key's first request.",
                                        "schema": ["type": "string", "const": "true"],
                                    ]
                                ]),
                            "400": errorResponse("invalid_json or invalid_request (including a malformed Idempotency-Key)."),
                            "401": errorResponse("unauthenticated: the link's flow needs a signed-in user."),
                            "408": errorResponse("request_timeout: the body stopped arriving before the request's deadline; the connection is closed."),
                            "409": errorResponse("conflict: a request with this Idempotency-Key is still in flight; retry after Retry-After seconds."),
                            "422": errorResponse("idempotency_key_reused: the key was used for a different request."),
                            "503": errorResponse("unavailable."),
                        ])
                ]
            ],
            tags: [["name": "deep links", "description": "Links from NFC tags, e-mails and other apps, checked against Flows/deeplinks.yaml."]])
    }
}
