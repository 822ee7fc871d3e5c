import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `timestamptz` in both directions, at microsecond precision. Connections are opened with
/// `DateStyle=ISO` and `TimeZone=UTC` so the text form is always `YYYY-MM-DD HH:MM:SS[.ffffff]+00`.
extension Date: PostgresCodable {
    public var postgresParameter: PostgresParameter { .timestamp(self) }

    /// Room for the longest text form: a sign, the ten digits of the last year `gmtime_r`
    /// gives, and the 23 bytes after the year.
    static let postgresTextCapacity = 34

    /// Writes the text form into `buffer` (``postgresTextCapacity`` bytes at least); returns its length.
    static func writePostgresText(_ date: Date, to buffer: UnsafeMutableRawBufferPointer) -> Int {
        let totalMicros = (date.timeIntervalSince1970 * 1_000_000).rounded()
        var seconds = Int(floor(totalMicros / 1_000_000))
        let micros = Int(totalMicros) - seconds * 1_000_000
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let year = Int(parts.tm_year) + 1900
        // Four digits for the years anyone stores; more past 9999, and a sign before year 0.
        var yearWidth = 4
        var limit: UInt = 10_000
        while year.magnitude >= limit {
            yearWidth += 1
            limit *= 10
        }
        // Every command binds a timestamp or two: written in place, not from fourteen strings.
        precondition(buffer.count >= (year < 0 ? 1 : 0) + yearWidth + 23)
        var index = 0
        func put(_ value: Int, _ width: Int, then separator: UInt8) {
            var value = value
            for offset in stride(from: width - 1, through: 0, by: -1) {
                buffer[index + offset] = UInt8(truncatingIfNeeded: 48 + value % 10)
                value /= 10
            }
            buffer[index + width] = separator
            index += width + 1
        }
        if year < 0 {
            buffer[0] = UInt8(ascii: "-")
            index = 1
        }
        put(Int(year.magnitude), yearWidth, then: UInt8(ascii: "-"))
        put(Int(parts.tm_mon) + 1, 2, then: UInt8(ascii: "-"))
        put(Int(parts.tm_mday), 2, then: UInt8(ascii: "T"))
        put(Int(parts.tm_hour), 2, then: UInt8(ascii: ":"))
        put(Int(parts.tm_min), 2, then: UInt8(ascii: ":"))
        put(Int(parts.tm_sec), 2, then: UInt8(ascii: "."))
        put(micros, 6, then: UInt8(ascii: "Z"))
        return index
    }

    public static func decode(from bytes: UnsafeRawBufferPointer?, type: PostgresTypeOID) throws -> Date {
        let raw = try requireValue(bytes, "Date")
        guard type == .timestamptz || type == .timestamp || type == .date else {
            throw decodingError("cannot decode a \(type) column as Date")
        }
        guard let date = parse(raw) else {
            throw decodingError("'\(String(decoding: raw, as: UTF8.self))' is not an ISO timestamp (is DateStyle ISO?)")
        }
        return date
    }

    /// Parses `YYYY-MM-DD[ HH:MM:SS[.f+]][(+|-)HH[:MM[:SS]]]`.
    private static func parse(_ s: UnsafeRawBufferPointer) -> Date? {
        var i = 0
        func number(_ width: Int) -> Int? {
            guard i + width <= s.count else { return nil }
            var value = 0
            for _ in 0..<width {
                let d = Int(s[i]) - 48
                guard d >= 0, d <= 9 else { return nil }
                value = value * 10 + d
                i += 1
            }
            return value
        }
        func expect(_ c: Character) -> Bool {
            guard i < s.count, s[i] == c.asciiValue! else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2) else {
            return nil
        }
        var hour = 0, minute = 0, second = 0
        var fraction = 0.0
        if i < s.count, s[i] == UInt8(ascii: " ") || s[i] == UInt8(ascii: "T") {
            i += 1
            guard let h = number(2), expect(":"), let m = number(2), expect(":"), let sec = number(2) else { return nil }
            hour = h; minute = m; second = sec
            if i < s.count, s[i] == UInt8(ascii: ".") {
                i += 1
                var scale = 0.1
                while i < s.count, s[i] >= 48, s[i] <= 57 {
                    fraction += Double(s[i] - 48) * scale
                    scale /= 10
                    i += 1
                }
            }
        }
        var offsetSeconds = 0
        if i < s.count, s[i] == UInt8(ascii: "+") || s[i] == UInt8(ascii: "-") {
            let sign = s[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = number(2) else { return nil }
            var total = oh * 3600
            if expect(":") { guard let om = number(2) else { return nil }; total += om * 60 }
            if expect(":") { guard let os = number(2) else { return nil }; total += os }
            offsetSeconds = sign * total
        }
        guard i == s.count else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let epoch = timegm(&parts)
        return Date(timeIntervalSince1970: Double(epoch - offsetSeconds) + fraction)
    }
}
