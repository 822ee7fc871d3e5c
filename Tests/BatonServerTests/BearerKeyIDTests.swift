import ExtrasBase64
import Foundation
import Testing

@testable import BatonServer

/// The token header's `kid`, read by Baton's parsers, against the Foundation reading jwt-kit
/// gives it: they must agree on every header, odd ones included.
@Suite struct BearerKeyIDTests {
    static let headers = [
        #"{"alg":"HS256","typ":"JWT"}"#,
        #"{"alg":"RS256","typ":"JWT","kid":"key1"}"#,
        #"{"kid":"ünïcødé","alg":"ES256"}"#,
        #"{"kid":null}"#,
        #"{"kid":7}"#,
        #"{"kid":"a","kid":"b"}"#,
        #"{"k\u0069d":"escaped"}"#,
        #"{"kid":"quote\"inside"}"#,
        #"["kid"]"#,
        #"not json"#,
        "",
    ]

    static func token(header: String) -> String {
        Base64.encodeToString(bytes: Array(header.utf8), options: [.base64UrlAlphabet, .omitPaddingCharacter]) + ".e30.c2ln"
    }

    @Test(arguments: headers)
    func agreesWithFoundation(header: String) {
        let token = Self.token(header: header)
        #expect(BearerAuthenticator.keyID(ofToken: token) == BearerAuthenticator.keyIDThroughFoundation(ofToken: token))
    }

    @Test func readsTheKeyID() {
        #expect(BearerAuthenticator.keyID(ofToken: Self.token(header: #"{"alg":"RS256","kid":"key1"}"#)) == "key1")
        #expect(BearerAuthenticator.keyID(ofToken: Self.token(header: #"{"alg":"HS256"}"#)) == nil)
    }

    @Test(arguments: ["", ".", "!!!.e30.c2ln", "eyJraWQiOiJ4In0=.e30.c2ln", "eyJraWQiOiJ4In0"])
    func oddTokensAgreeWithFoundation(token: String) {
        #expect(BearerAuthenticator.keyID(ofToken: token) == BearerAuthenticator.keyIDThroughFoundation(ofToken: token))
    }
}
