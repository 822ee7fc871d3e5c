import Foundation

/// Ports on 127.0.0.1, probed with plain sockets (is a server up yet, is a port free).
enum Loopback {
    /// Runs `body` with a fresh TCP socket (closed afterwards) and the address 127.0.0.1:`port`;
    /// nil when no socket could be made.
    static func withSocket<R>(port: Int, _ body: (Int32, UnsafePointer<sockaddr>, socklen_t) -> R) -> R? {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}
