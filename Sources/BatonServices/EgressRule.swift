import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where Baton may send service calls: a service's own configured host only (paths are
/// percent-encoded, redirects are not followed), and never to loopback, private, link-local or
/// otherwise special addresses unless the service is marked `internal: true`.
///
/// Every address the host name resolves to is checked, so a public name that points at
/// `127.0.0.1` or `169.254.169.254` (cloud metadata) is refused as well.
public enum EgressRule {
    /// Why a call to `host` is refused, or nil when it may go.
    public static func refusal(host: String, isInternal: Bool, resolve: (String) -> [String]) -> String? {
        if isInternal { return nil }
        let addresses = isLiteralAddress(host) ? [host] : resolve(host)
        if addresses.isEmpty { return nil }  // unresolvable: the connection attempt fails on its own
        if let special = addresses.first(where: isSpecial) {
            return "\(host) resolves to \(special), a loopback, private or link-local address; mark the service internal: true if that is intended"
        }
        return nil
    }

    /// The addresses of `host` (IPv4 and IPv6), from the system resolver.
    @Sendable public static func resolve(_ host: String) -> [String] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var found: [String] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(entry.pointee.ai_addr, entry.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST) == 0 {
                found.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
            cursor = entry.pointee.ai_next
        }
        return found
    }

    static func isLiteralAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// Loopback, private (RFC 1918, unique-local), link-local, carrier-grade NAT, unspecified,
    /// multicast, and IPv4-mapped forms of those.
    public static func isSpecial(_ address: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, address, &v4) == 1 {
            return isSpecialV4(withUnsafeBytes(of: &v4) { Array($0) })
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, address.split(separator: "%").first.map(String.init) ?? address, &v6) == 1 else { return true }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF { return isSpecialV4(Array(bytes[12..<16])) }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) { return true }  // :: and ::1
        if bytes[0] & 0xFE == 0xFC { return true }  // fc00::/7 unique local
        if bytes[0] == 0xFE, bytes[1] & 0xC0 == 0x80 { return true }  // fe80::/10 link-local
        if bytes[0] == 0xFF { return true }  // multicast
        return false
    }

    private static func isSpecialV4(_ b: [UInt8]) -> Bool {
        switch (b[0], b[1]) {
        case (0, _), (10, _), (127, _): return true
        case (169, 254): return true
        case (172, 16...31): return true
        case (192, 168): return true
        case (100, 64...127): return true
        case (224...255, _): return true
        default: return false
        }
    }
}
