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
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("localhost") }
        let now = Date()
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(30 * 86400), issuer: name,
            subject: name, signatureAlgorithm: .ecdsaWithSHA256, extensions: Certificate.Extensions(), issuerPrivateKey: .init(key))
        let certificatePath = directory.appendingPathComponent("server.crt").path
        let keyPath = directory.appendingPathComponent("server.key").path
        try certificate.serializeAsPEM().pemString.write(toFile: certificatePath, atomically: false, encoding: .utf8)
        try key.pemRepresentation.write(toFile: keyPath, atomically: false, encoding: .utf8)
        chmod(keyPath, 0o600)
        // Run as root, the cluster runs as `postgres` (EmbeddedPostgres): the files are its.
        if geteuid() == 0, let account = getpwnam("postgres") {
            for path in [certificatePath, keyPath] { chown(path, account.pointee.pw_uid, account.pointee.pw_gid) }
        }
        return (certificatePath, keyPath)
    }
}
