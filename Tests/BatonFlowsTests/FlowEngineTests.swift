import BatonFlows
import BatonJSON
import Testing

@Suite("Flow engine")
struct FlowEngineTests {
    let host = FakeHost.fixtures(existingNotes: ["milk"])

    @Test("the fixture flows load and lint cleanly")
    func fixturesLint() {
        #expect(Fixtures.bundle.diagnostics.isEmpty, "\(Fixtures.bundle.diagnostics.map(\.description))")
        #expect(Set(Fixtures.bundle.flows.keys) == ["note-create", "counter", "pick", "device-only"])
    }

    @Test("start renders the start state's input with interpolated parameters")
    func startInput() async throws {
        let step = try await Fixtures.engine("note-create").start(parameters: ["folder": "home"], host: host, call: Fixtures.user)
        #expect(step.session.state == "write")
        #expect(step.finished == nil)
        guard case .input(let input) = step.reply else { Issue.record("expected input, got \(step.reply)"); return }
        #expect(input.title == "Write a note")
        #expect(input.message == "Folder: home")
        #expect(input.placeholder == "Something to remember")
        #expect(input.minLength == 1 && input.maxLength == 50)
        #expect(input.submitTitle == "Save" && input.cancelTitle == "Cancel")
        #expect(input.error == nil)
    }

    @Test("a loop through a service call counts its action states across the calls: one command is refused after 32, not run forever")
    func loopThroughACall() async throws {
        // Lint refuses this flow (FlowLinter.actionLoops); the engine's own guard stands behind it.
        let source = """
            flow: poll
            start: check
            states:
              check:
                call: { service: tracking, path: /v1/parcels/3SDEMO0000001 }
                outcomes: { 2xx: shown, unavailable: check }
              shown:
                done: {}
            """
        let (loaded, diagnostics) = FlowLoader.load(source: source, file: "Flows/poll.yaml")
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        let engine = FlowEngine(flow: try #require(loaded))
        var step = try await engine.start(parameters: [:], host: host, call: Fixtures.user)
        var calls = 0
        do {
            while let pending = step.pending, calls < 100 {
                calls += 1
                step = try await engine.resume(
                    call: pending.call, result: .failure(.timeout), session: step.session, host: host, call: Fixtures.user, hops: pending.hops)
            }
            Issue.record("the loop went on for \(calls) calls")
        } catch let error as FlowEngineError {
            #expect(error.kind == .definition)
            #expect(error.message.contains("more than \(FlowEngine.maxHops) action states"), "\(error.message)")
        }
        #expect(calls > 1 && calls <= FlowEngine.maxHops + 1, "one call per pass through the action state: \(calls)")
    }

    @Test("a step resumed after a service call validates a later transition's input: rules against the input it validated before the call")
    func inputRulesAfterACall() async throws {
        let source = """
            flow: label
            start: ask
            states:
              ask:
                input: { title: Label, minLength: 1, maxLength: 20 }
                on:
                  submit:
                    call: { service: tracking, path: /v1/parcels/3SDEMO0000001 }
                    outcomes: { 2xx: check }
              check:
                match: "{{result.status}}"
                cases: { lost: { error: "Lost." } }
                otherwise:
                  input: { accept: [text], trim: true, uppercase: true, pattern: "^3S[A-Z0-9]+$", patternMessage: "Not a label." }
                  to: shown
              shown:
                done: { message: "Label {{input.value}}" }
            """
        let (loaded, diagnostics) = FlowLoader.load(source: source, file: "Flows/label.yaml")
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        let engine = FlowEngine(flow: try #require(loaded))
        let started = try await engine.start(parameters: [:], host: host, call: Fixtures.user)
        let submitted = try await engine.handle(
            event: "submit", input: CommandInput(text: " 3sdemo0000001 "), session: started.session, host: host, call: Fixtures.user)
        let pending = try #require(submitted.pending)
        let step = try await engine.resume(
            call: pending.call, result: .response(status: 200, body: ["status": "known"]), session: submitted.session, host: host,
            call: Fixtures.user, hops: pending.hops)
        #expect(step.reply == .done(message: "Label 3SDEMO0000001", refresh: .none))
    }

    @Test("parameters are checked: unknown, pattern, required")
    func parameters() async throws {
        func refusal(_ engine: FlowEngine, _ parameters: JSONObject) async -> String? {
            do {
                _ = try await engine.start(parameters: parameters, host: host, call: Fixtures.user)
                return nil
            } catch let error as FlowEngineError where error.kind == .invalidParameters {
                return error.message
            } catch {
                return "another error: \(error)"
            }
        }
        let engine = Fixtures.engine("note-create")
        #expect(await refusal(engine, ["folder": "Home!"])?.contains("'folder'") == true)
        #expect(await refusal(engine, ["nope": "x"]) == "flow 'note-create': unknown parameter 'nope'")
        #expect(await refusal(engine, [:]) == nil, "folder is not required")
        // A parameter declared without `required:` is required.
        let source = """
            flow: needs
            params:
              id: { pattern: "^[a-z]+$" }
            start: shown
            states:
              shown:
                done: { message: "{{params.id}}" }
            """
        let (loaded, diagnostics) = FlowLoader.load(source: source, file: "Flows/needs.yaml")
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        let needs = FlowEngine(flow: try #require(loaded))
        #expect(await refusal(needs, [:]) == "flow 'needs': parameter 'id' is required")
        #expect(await refusal(needs, ["id": .null]) == "flow 'needs': parameter 'id' is required")
        #expect(await refusal(needs, ["id": "abc"]) == nil)
    }

    @Test("submit runs the effect with interpolated arguments and branches on its outcome to done")
    func effectOutcome() async throws {
        let engine = Fixtures.engine("note-create")
        let started = try await engine.start(parameters: ["folder": "home"], host: host, call: Fixtures.user)
        let step = try await engine.handle(
            event: "submit", input: CommandInput(text: "  buy bread  "), session: started.session, host: host, call: Fixtures.user)
        #expect(step.reply == .done(message: "Saved “buy bread”", refresh: .all))
        #expect(step.finished == .completed)
        #expect(step.effects == ["notes.create"])
        #expect(host.recorded.contains(#"effect notes.create {"text":"buy bread","folder":"home"}"#))
    }

    @Test("an outcome mapped to an error stays in the state and re-asks with the message")
    func outcomeError() async throws {
        let engine = Fixtures.engine("note-create")
        let started = try await engine.start(parameters: [:], host: host, call: Fixtures.user)
        let step = try await engine.handle(event: "submit", input: CommandInput(text: "milk"), session: started.session, host: host, call: Fixtures.user)
        #expect(step.session.state == "write")
        #expect(step.finished == nil)
        guard case .input(let input) = step.reply else { Issue.record("expected input"); return }
        #expect(input.error == "You already wrote “milk”.")
        #expect(input.value == "milk")
    }

    @Test("validation: empty, too long, control characters — re-ask without running the effect")
    func validation() async throws {
        let engine = Fixtures.engine("note-create")
        let started = try await engine.start(parameters: [:], host: host, call: Fixtures.user)
        for (text, message) in [
            ("   ", "Please enter a value."),
            (String(repeating: "x", count: 51), "Use at most 50 characters (this has 51)."),
            ("two\nlines", "Line breaks, tabs and other control characters aren't allowed here."),
            ("nul\u{0}byte", "Line breaks, tabs and other control characters aren't allowed here."),
        ] {
            let step = try await engine.handle(event: "submit", input: CommandInput(text: text), session: started.session, host: host, call: Fixtures.user)
            guard case .input(let input) = step.reply else { Issue.record("expected input for \(text.debugDescription)"); continue }
            #expect(input.error == message, "\(text.debugDescription)")
        }
        let missing = try await engine.handle(event: "submit", input: .none, session: started.session, host: host, call: Fixtures.user)
        guard case .input(let input) = missing.reply else { Issue.record("expected input"); return }
        #expect(input.error == "Please enter a value.")
        #expect(!host.recorded.contains { $0.hasPrefix("effect") })
    }

    @Test("length counts characters as people see them, and caps the code points hiding behind them")
    func graphemes() throws {
        var rules = InputValidation.text
        rules.minLength = 1
        rules.maxLength = 5
        // Five characters, each a letter with a combining accent: fine.
        #expect(try InputCheck.validate(rules, input: ["text": "e\u{301}e\u{301}e\u{301}e\u{301}e\u{301}"], scope: TemplateScope()).get()
            == "e\u{301}e\u{301}e\u{301}e\u{301}e\u{301}")
        // Family emoji: one character, several code points.
        #expect((try? InputCheck.validate(rules, input: ["text": "👨‍👩‍👧"], scope: TemplateScope()).get()) != nil)
        // Two characters carrying 30 combining marks: refused with a reason, not stored.
        let zalgo = "a" + String(repeating: "\u{301}", count: 15) + "b" + String(repeating: "\u{302}", count: 15)
        guard case .failure(let problem) = InputCheck.validate(rules, input: ["text": .string(zalgo)], scope: TemplateScope()) else {
            Issue.record("zalgo accepted")
            return
        }
        #expect(problem.message.hasPrefix("That is too long"))
        // Text comes back in NFC, and the code-point bound holds for that form: U+0958 is two
        // code points in NFC, so five of these (four code points each as typed) are too many.
        let composed = try InputCheck.validate(rules, input: ["text": "Cafe\u{301}"], scope: TemplateScope()).get()
        #expect(Array(composed.unicodeScalars) == Array("Caf\u{E9}".unicodeScalars))
        let expanding = String(repeating: "\u{958}\u{301}\u{302}\u{303}", count: 5)
        #expect(expanding.unicodeScalars.count == 20)
        #expect((try? InputCheck.validate(rules, input: ["text": .string(expanding)], scope: TemplateScope()).get()) == nil)
    }

    @Test("invisible and text-direction characters are refused, anywhere in the text; their visible neighbours are not")
    func invisibleCharacters() throws {
        // Without trimming, so the characters at either end are checked too (with it, U+0085,
        // U+2028 and U+2029 at the ends are trimmed away like any line break: see below).
        var rules = InputValidation.text
        rules.trim = false
        let refused: [UInt32] = [0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E]
            + Array(0x2060...0x2069) + [0xFEFF, 0x0085, 0x2028, 0x2029]
            // The Arabic letter mark (a direction mark like U+200E/F), the soft hyphen, the
            // combining grapheme joiner, the Mongolian vowel separator, the Hangul fillers (blank
            // letters), the deprecated format characters, the interlinear annotation marks, and the
            // tag characters outside a flag.
            + [0x061C, 0x00AD, 0x034F, 0x180E, 0x115F, 0x1160, 0x3164, 0xFFA0] + Array(0x206A...0x206F) + Array(0xFFF9...0xFFFB)
            + [0xE0001, 0xE0020, 0xE0041, 0xE007F]
        for value in refused {
            let scalar = try #require(Unicode.Scalar(value))
            // Between letters, first, last, and between two pictographs (only U+200D may join those).
            for text in ["a\(scalar)b", "\(scalar)abc", "abc\(scalar)", "👩\(scalar)x"] {
                guard case .failure(let problem) = InputCheck.validate(rules, input: ["text": .string(text)], scope: TemplateScope()) else {
                    Issue.record("U+\(String(value, radix: 16, uppercase: true)) accepted in \(text.debugDescription)")
                    continue
                }
                #expect(problem.message == InputCheck.invisibleCharacterMessage, "U+\(String(value, radix: 16, uppercase: true))")
            }
        }
        // The neighbours of those ranges are ordinary characters: a hair space, the dagger, the
        // superscript zero, the Arabic presentation form before U+FEFF.
        for value: UInt32 in [0x200A, 0x2010, 0x2030, 0x2070, 0xFEFC, 0x00E9] {
            let text = "a\(try #require(Unicode.Scalar(value)))b"
            #expect((try? InputCheck.validate(rules, input: ["text": .string(text)], scope: TemplateScope()).get()) == text)
        }
        #expect((try? InputCheck.validate(.text, input: ["text": "\u{2028}Name\u{85}"], scope: TemplateScope()).get()) == "Name")
        #expect((try? InputCheck.validate(.text, input: ["text": "\u{FEFF}Name"], scope: TemplateScope()).get()) == nil)
        // U+200D joining pictographs is one visible emoji, so it stays allowed there; a joiner
        // between letters, at the end of an emoji or before a letter is not.
        // So are the tags that spell a subdivision's flag after U+1F3F4 (🏴󠁧󠁢󠁳󠁣󠁴󠁿, Scotland).
        for text in ["👩\u{200D}💻 Coding", "👨\u{200D}👩\u{200D}👧", "🏳\u{FE0F}\u{200D}🌈", "👍🏽\u{200D}👍",
            "Go \u{1F3F4}\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}!"] {
            #expect((try? InputCheck.validate(rules, input: ["text": .string(text)], scope: TemplateScope()).get()) == text, "\(text)")
        }
        for text in ["a\u{200D}b", "👩\u{200D}", "👩\u{200D}x", "\u{200D}💻"] {
            #expect((try? InputCheck.validate(rules, input: ["text": .string(text)], scope: TemplateScope()).get()) == nil, "\(text.debugDescription)")
        }
    }

    @Test("an invisible character re-asks with the message, without running the effect")
    func invisibleReasked() async throws {
        let engine = Fixtures.engine("note-create")
        let started = try await engine.start(parameters: [:], host: host, call: Fixtures.user)
        let step = try await engine.handle(
            event: "submit", input: CommandInput(text: "evil\u{202E}txt.exe"), session: started.session, host: host, call: Fixtures.user)
        guard case .input(let input) = step.reply else { Issue.record("expected input"); return }
        #expect(input.error == InputCheck.invisibleCharacterMessage)
        #expect(!host.recorded.contains { $0.hasPrefix("effect") })
    }

    @Test("cancel leads to a refresh terminal that records the session as cancelled")
    func cancel() async throws {
        let engine = Fixtures.engine("note-create")
        let started = try await engine.start(parameters: [:], host: host, call: Fixtures.user)
        let step = try await engine.handle(event: "cancel", input: .none, session: started.session, host: host, call: Fixtures.user)
        #expect(step.reply == .refresh)
        #expect(step.finished == .cancelled)
    }

    @Test("an action start state runs its effect immediately and answers done with section refresh")
    func actionState() async throws {
        let step = try await Fixtures.engine("counter").start(parameters: ["name": "clicks"], host: host, call: Fixtures.user)
        #expect(step.reply == .done(message: "Count is 7", refresh: .sections(["counts"])))
        #expect(step.finished == .completed)
        #expect(step.effects == ["counter.increment"])
    }

    @Test("choice input: options from a loader plus static ones; only offered choices are accepted")
    func choice() async throws {
        let engine = Fixtures.engine("pick")
        let started = try await engine.start(parameters: [:], host: host, call: Fixtures.user)
        guard case .input(let input) = started.reply else { Issue.record("expected input"); return }
        #expect(input.kind == .choice)
        #expect(input.options.map(\.id) == ["red", "blue", "green", "other"])
        #expect(input.options.map(\.title) == ["Red", "Blue", "Green", "Something else…"])
        let bogus = try await engine.handle(event: "submit", input: CommandInput(choice: "purple"), session: started.session, host: host, call: Fixtures.user)
        guard case .input(let again) = bogus.reply else { Issue.record("expected input"); return }
        #expect(again.error == "That choice isn't available any more.")
    }

    @Test("guards: a refused guard follows its else; an allowed one continues")
    func guards() async throws {
        let engine = Fixtures.engine("pick")
        let started = try await engine.start(parameters: [:], host: host, call: Fixtures.user)
        let refused = try await engine.handle(event: "submit", input: CommandInput(choice: "green"), session: started.session, host: host, call: Fixtures.user)
        guard case .input(let input) = refused.reply else { Issue.record("expected input"); return }
        #expect(input.error == "That colour is sold out.")
        #expect(refused.session.state == "choose")
        let allowed = try await engine.handle(event: "submit", input: CommandInput(choice: "red"), session: started.session, host: host, call: Fixtures.user)
        #expect(allowed.session.state == "confirm")
    }

    @Test("match picks a case; a screen renders components, conditions and command actions by event")
    func matchAndScreen() async throws {
        let engine = Fixtures.engine("pick")
        var session = try await engine.start(parameters: [:], host: host, call: Fixtures.user).session
        let describe = try await engine.handle(event: "submit", input: CommandInput(choice: "other"), session: session, host: host, call: Fixtures.user)
        #expect(describe.session.state == "describe")
        session = describe.session
        let badPattern = try await engine.handle(event: "submit", input: CommandInput(text: "Teal!"), session: session, host: host, call: Fixtures.user)
        guard case .input(let input) = badPattern.reply else { Issue.record("expected input"); return }
        #expect(input.error == "Use lowercase letters, please (you wrote “Teal!”).")
        let confirm = try await engine.handle(event: "submit", input: CommandInput(text: "sea green"), session: session, host: host, call: Fixtures.user)
        guard case .screen(let presentation, let screen) = confirm.reply else { Issue.record("expected screen"); return }
        #expect(presentation == .modal)
        #expect(screen["type"] == "componentScreen")
        let components = screen["sections"]?.arrayValue?.first?["components"]?.arrayValue ?? []
        #expect(components.map { $0["id"] } == ["chosen", "described", "ok", "back"])
        #expect(components[0]["text"] == "You picked other")
        #expect(components[1]["text"] == "Described as sea green")
        #expect(components[2]["action"] == ["type": "command", "event": "confirm", "title": "Confirm"])
    }

    @Test("when: hides a component whose reference is empty")
    func whenHides() async throws {
        let engine = Fixtures.engine("pick")
        let started = try await engine.start(parameters: [:], host: host, call: Fixtures.user)
        let confirm = try await engine.handle(event: "submit", input: CommandInput(choice: "red"), session: started.session, host: host, call: Fixtures.user)
        guard case .screen(_, let screen) = confirm.reply else { Issue.record("expected screen"); return }
        let ids = screen["sections"]?.arrayValue?.first?["components"]?.arrayValue?.map { $0["id"] }
        #expect(ids == ["chosen", "ok", "back"])
    }

    @Test("an error state with retry is not terminal; its retry event goes back")
    func errorRetry() async throws {
        let engine = Fixtures.engine("pick")
        var session = try await engine.start(parameters: [:], host: host, call: Fixtures.user).session
        session = try await engine.handle(event: "submit", input: CommandInput(choice: "blue"), session: session, host: host, call: Fixtures.user).session
        let failed = try await engine.handle(event: "confirm", input: .none, session: session, host: host, call: Fixtures.user)
        #expect(failed.reply == .error(message: "Ordering blue failed.", retry: .event("retry")))
        #expect(failed.finished == nil)
        let back = try await engine.handle(event: "retry", input: .none, session: failed.session, host: host, call: Fixtures.user)
        #expect(back.session.state == "confirm")
    }

    @Test("an event the state does not send is refused")
    func unknownEvent() async throws {
        let engine = Fixtures.engine("note-create")
        let started = try await engine.start(parameters: [:], host: host, call: Fixtures.user)
        let error = await #expect(throws: FlowEngineError.self) {
            try await engine.handle(event: "confirm", input: .none, session: started.session, host: host, call: Fixtures.user)
        }
        #expect(error?.kind == .invalidEvent)
    }

    @Test("subject is interpolated")
    func subject() async throws {
        let call = FlowCall(subject: FlowSubject(kind: .device, id: "d-1"), flow: "device-only", sessionID: nil)
        let step = try await Fixtures.engine("device-only").start(parameters: [:], host: host, call: call)
        #expect(step.reply == .done(message: "Hello, device d-1", refresh: .none))
    }
}

@Suite("Templates")
struct TemplateTests {
    @Test("references are parsed, rendered, and keep JSON types when alone")
    func references() throws {
        let template = try TemplateString(parsing: "Hi {{ user.name }}, you have {{count}} items")
        #expect(template.references == [["user", "name"], ["count"]])
        let scope = TemplateScope(["user": ["name": "Ann"], "count": 3])
        #expect(template.render(scope) == "Hi Ann, you have 3 items")
        #expect(try TemplateString(parsing: "{{count}}").value(scope) == 3)
        #expect(try TemplateString(parsing: "{{user}}").value(scope) == ["name": "Ann"])
        #expect(try TemplateString(parsing: "{{missing.path}}").render(scope) == "")
    }

    @Test("templates have no expressions: anything but a dotted name is an error")
    func noExpressions() {
        for text in ["{{a + b}}", "{{ f(x) }}", "{{}}", "{{a..b}}", "open {{ only", "{{a|upper}}"] {
            #expect(throws: TemplateError.self, "\(text)") { try TemplateString(parsing: text) }
        }
    }

    @Test("each repeats with item and index; when filters; negation works")
    func eachAndWhen() throws {
        var diagnostics: [Diagnostic] = []
        guard case .success(let node) = YAMLSource.parse(
            """
            list:
              - each: "{{items}}"
                id: "row-{{index}}"
                title: "{{item.name}}"
              - when: "!{{items}}"
                id: empty
            """, file: "t.yaml")
        else { Issue.record("parse failed"); return }
        let template = JSONTemplate.from(node, diagnostics: &diagnostics)
        #expect(diagnostics.isEmpty)
        let full = template.render(TemplateScope(["items": [["name": "A"], ["name": "B"]]]))
        #expect(full == ["list": [["id": "row-0", "title": "A"], ["id": "row-1", "title": "B"]]])
        let empty = template.render(TemplateScope(["items": []]))
        #expect(empty == ["list": [["id": "empty"]]])
    }
}
