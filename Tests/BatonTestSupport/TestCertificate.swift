import BatonPostgres
import Crypto
import Foundation
import X509

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A self-signed certificate for the throwaway cluster, so tests can reach it over TLS
/// (`TestDatabase.tlsConninfo`). Clients use `sslmode=require`: encrypted, not verified.
enum TestCertificate {
    /// Writes `server.crt` and `server.key` into `directory`, the key readable only by the
    /// account PostgreSQL runs as (it refuses a key others can read); returns their paths.
    static func write(into directory: URL) throws -> (certificate: String, key: String) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Searchable by the cluster's account whatever the umask (the key itself is not readable).
        guard chmod(directory.path, 0o755) == 0 else {
            throw TestFailure("could not open \(directory.path) to the test cluster's account (errno \(errno))")
        }
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("localhost") }
        let now = Date()
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(30 * 86400), issuer: name,
            subject: name, signatureAlgorithm: .ecdsaWithSHA256, extensions: Certificate.Extensions(), issuerPrivateKey: .init(key))
        let files = [
            (directory.appendingPathComponent("server.crt").path, try certificate.serializeAsPEM().pemString, 0o644),
            (directory.appendingPathComponent("server.key").path, key.pemRepresentation, 0o600),
        ]
        // Run as root, the cluster runs as another account (EmbeddedPostgres): the files are its.
        let owner = try EmbeddedPostgres.serviceUser()
        for (path, text, mode) in files {
            guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode]),
                chmod(path, mode_t(mode)) == 0,  // whatever the umask left
                owner.map({ chown(path, $0.uid, $0.gid) == 0 }) ?? true
            else {
                throw TestFailure("could not write \(path) for the test cluster's TLS (errno \(errno))")
            }
        }
        return (files[0].0, files[1].0)
    }
}
