#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

/// Why the server could not listen, in an operator's words: NIO's own text ("bind(descriptor:
/// ptr:bytes:): Address already in use) (errno: 98)") names a system call, not the fix.
public enum ListenFailure {
    /// The message for `error` thrown while binding `host`:`port`, or nil when `error` is not a
    /// failure to listen.
    public static func describe(_ error: any Error, host: String, port: Int) -> String? {
        let address = "\(host):\(port)"
        switch error {
        case let error as IOError:
            switch error.errnoCode {
            case EADDRINUSE:
                return "cannot listen on \(address): the port is in use by another process (another Baton?); choose another with --port or HTTP_PORT"
            case EACCES:
                return "cannot listen on \(address): permission denied (ports below 1024 need privileges); choose another with --port or HTTP_PORT"
            case EADDRNOTAVAIL:
                return "cannot listen on \(address): \(host) is not an address of this machine; set --host or HTTP_HOST (0.0.0.0 for every interface)"
            default:
                return nil
            }
        case is SocketAddressError:
            return "cannot listen on \(address): \(host) is not a known host or address; set --host or HTTP_HOST (0.0.0.0 for every interface)"
        default:
            return nil
        }
    }
}
