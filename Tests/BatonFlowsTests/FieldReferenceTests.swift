import BatonFlows
import Testing

@Suite("Lint of references into declared result fields")
struct FieldReferenceTests {
    static let catalog = FlowCatalog(
        effects: [
            CallSignature(
                name: "playlists.create", arguments: [ArgumentSpec("name")], outcomes: ["created"], fields: [FieldSpec("id"), FieldSpec("name")]),
            CallSignature(name: "playlists.delete", outcomes: ["deleted"], fields: [FieldSpec("title")]),
            CallSignature(name: "legacy.touch", outcomes: ["touched"]),
        ],
        loaders: [
            CallSignature(
                name: "playlists.get", arguments: [ArgumentSpec("id")],
                fields: [FieldSpec("id"), FieldSpec("name"), FieldSpec("tracks", .list, fields: [FieldSpec("id"), FieldSpec("title")])]),
            CallSignature(name: "catalog.list", returnsList: true, fields: [FieldSpec("id"), FieldSpec("name")]),
            CallSignature(name: "legacy.list", returnsList: true),
        ])

    /// Lints one flow written inline; the file is called `t.yaml`.
    func lint(_ yaml: String) -> [String] {
        let (flow, loading) = FlowLoader.load(source: yaml, file: "t.yaml")
        #expect(loading.isEmpty, "\(loading)")
        guard let flow else { return [] }
        return FlowLinter(catalog: Self.catalog).lint(flow).ordered.map(\.description)
    }

    @Test("{{result.nmae}} after an effect is an error at the template, with a suggestion")
    func resultField() {
        let found = lint(
            """
            flow: t
            auth: any
            start: ask
            states:
              ask:
                input: { title: Name, submit: Create }
                on:
                  submit:
                    do: playlists.create
                    with: { name: "{{input.text}}" }
                    outcomes: { created: created }
                  cancel: created
              created:
                done: { message: "Created {{result.nmae}} ({{result.id}})" }
            """)
        #expect(found == ["t.yaml:14:22: error: '{{result.nmae}}': no field 'nmae' in the result of effect 'playlists.create'; did you mean 'name'?"])
    }

    // Only what a flow validates is kept of a command's input: `{{input.text}}` on an event that
    // validates nothing renders empty, which an author would otherwise learn in production.
    @Test("{{input.<member>}} where nothing validates that member is a warning; an input state's submit and a transition's input: rules keep theirs")
    func unvalidatedInput() {
        let found = lint(
            """
            flow: t
            auth: any
            start: ask
            states:
              ask:
                input: { title: Name, submit: Create }
                on:
                  submit:
                    do: playlists.create
                    with: { name: "{{input.text}} {{input.value}} {{input.barcode}}" }
                    outcomes: { created: show }
                  cancel: show
              show:
                screen:
                  id: s
                  sections:
                    - id: main
                      components:
                        - { type: textField, id: name, action: { type: command, event: rename } }
                        - { type: textField, id: code, action: { type: command, event: scanned } }
                on:
                  rename:
                    do: playlists.create
                    with: { name: "{{input.text}}" }
                    outcomes: { created: done }
                  scanned:
                    input: { accept: [barcode, text], pattern: "^[0-9]+$", patternMessage: "{{input.value}} is not a code" }
                    do: playlists.create
                    with: { name: "{{input.barcode}} {{input.value}} {{input.choice}}" }
                    outcomes: { created: done }
              done:
                done: {}
            """)
        func unvalidated(_ member: String, at position: String) -> String {
            "t.yaml:\(position): warning: '{{input.\(member)}}' is empty here: a command's input is kept only as validated, by an input state's submit or a transition's input: rules, and nothing here validates '\(member)'"
        }
        #expect(found == [unvalidated("barcode", at: "10:23"), unvalidated("text", at: "24:23"), unvalidated("choice", at: "29:23")], "\(found)")
    }

    @Test("{{data.<load>.<field>}} is checked against the loader's fields, nested lists included")
    func dataField() {
        let found = lint(
            """
            flow: t
            auth: any
            start: show
            states:
              show:
                load:
                  playlist: { from: playlists.get, with: { id: "1" } }
                screen:
                  id: s
                  title: "{{data.playlist.nmae}}"
                  sections:
                    - id: tracks
                      components:
                        - { type: text, id: "t-{{item.id}}", each: "{{data.playlist.tracks}}", text: "{{item.titel}}" }
                        - { type: text, id: count, text: "{{data.playlist.tracks.0.title}} {{data.playlist.zzz}}" }
                        - { type: text, id: first, text: "{{data.playlist.tracks.title}}" }
                        - { type: button, id: ok, title: OK, action: { type: command, event: ok } }
                on:
                  ok: finished
              finished:
                done: {}
            """)
        #expect(
            found == [
                "t.yaml:10:14: error: '{{data.playlist.nmae}}': no field 'nmae' in loader 'playlists.get'; did you mean 'name'?",
                "t.yaml:14:90: error: '{{item.titel}}': no field 'titel' in each element of 'tracks' of loader 'playlists.get'; did you mean 'title'?",
                "t.yaml:15:46: error: '{{data.playlist.zzz}}': no field 'zzz' in loader 'playlists.get' (it has id, name, tracks)",
                "t.yaml:16:46: error: '{{data.playlist.tracks.title}}': 'tracks' of loader 'playlists.get' is a list, which has no field 'title' (use each: or optionsFrom, or an index such as .0)",
            ])
    }

    @Test("{{item.<field>}} in optionsFrom over a list loader")
    func optionsFromItem() {
        let found = lint(
            """
            flow: t
            auth: any
            start: pick
            states:
              pick:
                input:
                  kind: choice
                  title: Pick
                  optionsFrom: { from: catalog.list, id: "{{item.id}}", title: "{{item.nme}}" }
                  submit: OK
                on:
                  submit: finished
                  cancel: finished
              finished:
                done: {}
            """)
        #expect(found == ["t.yaml:9:68: error: '{{item.nme}}': no field 'nme' in each element of loader 'catalog.list'; did you mean 'name'?"])
    }

    @Test("shapes nobody declared stay silent; a field of any possible effect is accepted")
    func unknownShapesAreSilent() {
        let found = lint(
            """
            flow: t
            auth: any
            start: pick
            states:
              pick:
                input:
                  kind: choice
                  title: Pick
                  optionsFrom: { from: legacy.list, id: "{{item.anything}}", title: "{{item.at.all}}" }
                  submit: OK
                on:
                  submit:
                    match: "{{input.choice}}"
                    cases:
                      a: { do: legacy.touch, to: touched }
                      b: { do: playlists.create, with: { name: x }, to: shown }
                    otherwise: { do: playlists.delete, to: shown }
                  cancel: touched
              touched:
                done: { message: "{{result.whatever}}" }
              shown:
                done: { message: "{{result.name}} {{result.title}}" }
            """)
        #expect(found == [])
    }

    @Test("a result seen after either of two effects must be a field of one of them")
    func resultFromEitherEffect() {
        let found = lint(
            """
            flow: t
            auth: any
            start: pick
            states:
              pick:
                input: { kind: choice, title: Pick, options: [{ id: a, title: A }], submit: OK }
                on:
                  submit:
                    match: "{{input.choice}}"
                    cases:
                      a: { do: playlists.create, with: { name: x }, to: shown }
                    otherwise: { do: playlists.delete, to: shown }
                  cancel: shown
              shown:
                done: { message: "{{result.titel}}" }
            """)
        #expect(
            found == [
                "t.yaml:15:22: error: '{{result.titel}}': no field 'titel' in the result of effects 'playlists.create' or 'playlists.delete'; did you mean 'title'?"
            ])
    }

    @Test("screen templates: {{data.<load>.<field>}} and each over a list loader")
    func screenTemplate() {
        let (screen, loading) = ScreenTemplate.load(
            source: """
                screen: s
                load:
                  playlists: { from: catalog.list }
                  playlist: { from: playlists.get, with: { id: "1" } }
                content:
                  title: "{{data.playlist.nmae}}"
                  sections:
                    - id: all
                      components:
                        - { type: text, id: "p-{{item.id}}", each: "{{data.playlists}}", text: "{{item.nam}}" }
                """, file: "s.yaml")
        #expect(loading.isEmpty, "\(loading)")
        let found = ScreenLinter(catalog: Self.catalog).lint([screen!]).ordered.map(\.description)
        #expect(
            found == [
                "s.yaml:6:10: error: '{{data.playlist.nmae}}': no field 'nmae' in loader 'playlists.get'; did you mean 'name'?",
                "s.yaml:10:80: error: '{{item.nam}}': no field 'nam' in each element of loader 'catalog.list'; did you mean 'name'?",
            ])
    }

    @Test("suggestions count a swap of neighbouring letters as one edit")
    func suggestions() {
        #expect(Suggest.closestSpelling("nmae", in: ["id", "name"]) == "name")
        #expect(Suggest.closestSpelling("titel", in: ["id", "title"]) == "title")
        #expect(Suggest.closestSpelling("colour", in: ["id", "name"]) == nil)
    }
}
