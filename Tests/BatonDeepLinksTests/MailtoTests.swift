import BatonDeepLinks
import BatonFlows
import Testing

/// `mailto:` openUrl targets read as RFC 6068: the rule's pattern judges every address, and only
/// `subject` and `body` may follow, once each, properly encoded.
@Suite("mailto: outbound targets")
struct MailtoTests {
    let allowlist: DeepLinkAllowlist

    init() throws { allowlist = try Files.productAllowlist() }

    @Test("an address at the listed domain, with a subject and a body, is allowed; field names in any case")
    func allowed() {
        for url in [
            "mailto:help@example.com", "mailto:help@example.com?subject=Parcel%20UT-0001",
            "mailto:help@example.com?subject=Parcel%20UT-0001&body=Hello%2C%0D%0AIt%20was%20late.",
            "mailto:help@example.com?body=a+b&subject=Hi!", "mailto:help@example.com?Subject=Hi", "mailto:help%40example.com",
            "mailto:help@example.com,returns@example.com?subject=Both", "mailto:help@example.com?subject=",
        ] {
            #expect(allowlist.outbound(url) == .allowed, "\(url): \(allowlist.outbound(url))")
        }
    }

    @Test("recipients and headers smuggled in fields are refused, whatever the case of the name")
    func headerFields() {
        for url in [
            "mailto:help@example.com?cc=x@evil.example", "mailto:help@example.com?bcc=x@evil.example",
            "mailto:help@example.com?to=x@evil.example", "mailto:help@example.com?subject=Hi&CC=x@evil.example",
            "mailto:help@example.com?Bcc=x@evil.example&subject=Hi", "mailto:help@example.com?in-reply-to=%3Cid@evil.example%3E",
            "mailto:help@example.com?x-mailer=evil", "mailto:help@example.com?from=ceo@example.com",
        ] {
            #expect(allowlist.outbound(url).reason == .mailtoHeaderNotAllowed, "\(url): \(allowlist.outbound(url))")
        }
    }

    @Test("subject and body at most once: clients disagree on which copy wins")
    func repeated() {
        for url in [
            "mailto:help@example.com?subject=a&subject=b", "mailto:help@example.com?body=a&body=b",
            "mailto:help@example.com?subject=a&SUBJECT=b",
        ] {
            #expect(allowlist.outbound(url).reason == .mailtoRepeatedHeader, "\(url): \(allowlist.outbound(url))")
        }
    }

    @Test("several addresses only when each is listed; an encoded comma cannot hide a second one")
    func addresses() {
        #expect(allowlist.outbound("mailto:help@example.com,x@evil.example").reason == .badPath)
        #expect(allowlist.outbound("mailto:x@evil.example,help@example.com").reason == .badPath)
        #expect(allowlist.outbound("mailto:help@example.com,").reason == .badPath)
        #expect(allowlist.outbound("mailto:?subject=Hi").reason == .badPath)
        #expect(allowlist.outbound("mailto:?to=someone@evil.example").reason == .mailtoHeaderNotAllowed)
        for url in [
            "mailto:x@evil.example%2Chelp@example.com", "mailto:help@example.com%2Cx@evil.example",
            "mailto:help@example.com%3Fcc=x@evil.example", "mailto:help@example.com%0D%0Abcc:x@evil.example",
        ] {
            #expect(allowlist.outbound(url).reason == .mailtoBadEncoding, "\(url): \(allowlist.outbound(url))")
        }
        #expect(allowlist.outbound("mailto://example.com/help").reason == .badPath)
    }

    @Test("malformed or missing encodings are refused with their own reason")
    func encodings() {
        for url in [
            "mailto:help@example.com?subject=%zz", "mailto:help@example.com?subject=%4", "mailto:help@example.com?body=%C0%AF",
            "mailto:help%zz@example.com", "mailto:help@example.com?subject=a=b", "mailto:help@example.com?body=see/here",
            "mailto:help@example.com?subject", "mailto:help@example.com?=x", "mailto:help@example.com?subject=a&&body=b",
            "mailto:help@example.com?%73ubject=x", "mailto:help@example.com?subject=Hi%0D%0ABcc:%20x@evil.example",
            "mailto:help@example.com?body=nul%00", "mailto:help@example.com#frag",
        ] {
            #expect(allowlist.outbound(url).reason == .mailtoBadEncoding, "\(url): \(allowlist.outbound(url))")
        }
        // Unencoded characters no URL carries are still refused by the URL reader first.
        #expect(allowlist.outbound("mailto:help@example.com?subject=a b").reason == .badCharacter)
    }

    @Test("the parsed fields are the decoded text a mail client shows")
    func parsed() throws {
        let mail = try MailtoURL.parse("mailto:help@example.com,returns%40example.com?subject=Parcel%20UT-0001&body=a+b%26c").get()
        #expect(mail.addresses == ["help@example.com", "returns@example.com"])
        #expect(mail.subject == "Parcel UT-0001")
        #expect(mail.body == "a+b&c")
    }

    @Test("every refusal carries a bounded, snake_case reason label listed in DeepLinkReason.all")
    func labels() {
        for reason in [DeepLinkReason.mailtoHeaderNotAllowed, .mailtoRepeatedHeader, .mailtoBadEncoding] {
            #expect(DeepLinkReason.all.contains(reason))
        }
        let decision = allowlist.outbound("mailto:help@example.com?cc=x@evil.example")
        #expect(decision.metricDimensions.map { "\($0.0)=\($0.1)" } == ["result=blocked", "reason=mailto_header_not_allowed"])
    }
}
