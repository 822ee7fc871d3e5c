import HTTPTypes
import Testing

@testable import BatonServer

@Suite("Header values")
struct HeaderValueTests {
    @Test("a header read by name: absent, sent once, sent several times (joined as HTTPTypes joins them)")
    func value() throws {
        let name = try #require(HTTPField.Name("X-Client-Capabilities"))
        var fields: HTTPFields = [.contentType: "application/json"]
        #expect(fields.value(name) == nil)
        fields.append(HTTPField(name: name, value: "screens_v2"))
        #expect(fields.value(name) == "screens_v2")
        #expect(fields.value(.contentType) == "application/json")
        fields.append(HTTPField(name: .accept, value: "*/*"))
        fields.append(HTTPField(name: try #require(HTTPField.Name("x-client-capabilities")), value: "maps"))
        #expect(fields.value(name) == "screens_v2, maps")
        #expect(fields.value(name) == fields[name])

        var cookies = HTTPFields()
        cookies.append(HTTPField(name: .cookie, value: "a=1"))
        cookies.append(HTTPField(name: .cookie, value: "b=2"))
        #expect(cookies.value(.cookie) == "a=1; b=2")
    }
}
