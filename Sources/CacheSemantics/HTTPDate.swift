/// HTTP-date parsing and formatting (RFC 9110 section 5.6.7) without
/// Foundation: dates are seconds since the Unix epoch.
public enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Parses IMF-fixdate, the obsolete RFC 850 form and asctime. nil when
    /// invalid. Month and zone names are read in any case ("jan", "gmt"):
    /// RFC 9110 section 5.6.7 asks recipients to be robust, and an Expires
    /// read as invalid would mean "already expired".
    public static func parse(_ value: String) -> Int64? {
        if let fixed = parseFixdate(value) { return fixed }
        // One space between parts, as the grammar has it (RFC 9110 section
        // 5.6.7): a date with doubled spaces is invalid, and an invalid
        // Expires means "already expired". asctime pads a one-digit day with
        // a space ("Nov  6"), its only double space.
        var parts = value.split(separator: " ", omittingEmptySubsequences: false)
        if parts.count == 6, parts[2].isEmpty, parts[3].count == 1, parts[0].count == 3 { parts.remove(at: 2) }
        else if parts.count == 5, parts[2].count != 2 { return nil }
        guard !parts.contains(where: \.isEmpty) else { return nil }
        // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
        if parts.count == 6, parts[0].hasSuffix(","), isGMT(parts[5]),
           let day = Int(parts[1]), let month = monthIndex(parts[2]), let year = Int(parts[3]), parts[3].count == 4,
           let time = clock(parts[4]) {
            return epochSeconds(year: year, month: month, day: day, time: time)
        }
        // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
        if parts.count == 4, parts[0].hasSuffix(","), isGMT(parts[3]) {
            let dmy = parts[1].split(separator: "-")
            if dmy.count == 3, let day = Int(dmy[0]), let month = monthIndex(dmy[1]), let yy = Int(dmy[2]),
               dmy[2].count == 2, let time = clock(parts[2]) {
                // Two-digit years: RFC 9110 says interpret one more than 50 years ahead as the past.
                let year = yy + (yy < 70 ? 2000 : 1900)
                return epochSeconds(year: year, month: month, day: day, time: time)
            }
        }
        // asctime: Sun Nov  6 08:49:37 1994
        if parts.count == 5, let month = monthIndex(parts[1]), let day = Int(parts[2]),
           let time = clock(parts[3]), let year = Int(parts[4]), parts[4].count == 4 {
            return epochSeconds(year: year, month: month, day: day, time: time)
        }
        return nil
    }

    /// The usual form, "Sun, 06 Nov 1994 08:49:37 GMT", read from its 29
    /// bytes in place (every upstream response has a Date: no splitting
    /// into substrings). nil for anything else, which `parse` then reads the
    /// general way, with the same result for anything this accepts.
    private static func parseFixdate(_ value: String) -> Int64? {
        var value = value
        return value.withUTF8 { b -> Int64? in
            guard b.count == 29, b[3] == 0x2C, b[4] == 0x20, b[7] == 0x20, b[11] == 0x20, b[16] == 0x20,
                  b[19] == 0x3A, b[22] == 0x3A, b[25] == 0x20, b[26] == 0x47, b[27] == 0x4D, b[28] == 0x54,
                  b[0] != 0x20, b[1] != 0x20, b[2] != 0x20 else { return nil }
            func digits(_ from: Int, _ count: Int) -> Int? {
                var n = 0
                for i in from..<from + count {
                    guard b[i] >= 0x30 && b[i] <= 0x39 else { return nil }
                    n = n * 10 + Int(b[i] - 0x30)
                }
                return n
            }
            guard let day = digits(5, 2), let year = digits(12, 4), let h = digits(17, 2), let m = digits(20, 2),
                  let sec = digits(23, 2), h < 24, m < 60, sec < 61 else { return nil }
            let name = (UInt32(b[8]) << 16) | (UInt32(b[9]) << 8) | UInt32(b[10])
            guard let month = monthCodes.firstIndex(of: name) else { return nil }
            return epochSeconds(year: year, month: month + 1, day: day, time: h * 3600 + m * 60 + sec)
        }
    }

    /// Month names as three bytes in a word, for `parseFixdate`.
    private static let monthCodes: [UInt32] = months.map { name in name.utf8.reduce(0) { ($0 << 8) | UInt32($1) } }

    /// The 29 bytes of an IMF-fixdate for `seconds`.
    public static func format(_ seconds: Int64) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(29)
        let dayCount = Int(seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400)
        let secs = Int(seconds - Int64(dayCount) * 86400)
        let (y, m, d) = civil(fromDays: dayCount)
        let weekday = ((dayCount % 7) + 11) % 7  // 1970-01-01 was a Thursday
        out.append(contentsOf: days[weekday].utf8)
        out.append(contentsOf: ", ".utf8)
        two(d, &out)
        out.append(0x20)
        out.append(contentsOf: months[m - 1].utf8)
        out.append(0x20)
        two(y / 100, &out)
        two(y % 100, &out)
        out.append(0x20)
        two(secs / 3600, &out)
        out.append(0x3A)
        two(secs / 60 % 60, &out)
        out.append(0x3A)
        two(secs % 60, &out)
        out.append(contentsOf: " GMT".utf8)
        return out
    }

    public static func formatString(_ seconds: Int64) -> String {
        String(decoding: format(seconds), as: UTF8.self)
    }

    private static func two(_ v: Int, _ out: inout [UInt8]) {
        out.append(UInt8(0x30 + v / 10 % 10))
        out.append(UInt8(0x30 + v % 10))
    }

    private static func monthIndex(_ s: Substring) -> Int? {
        guard s.utf8.count == 3 else { return nil }
        let lower = s.lowercased()
        return months.firstIndex { $0.lowercased() == lower }.map { $0 + 1 }
    }

    private static func isGMT(_ s: Substring) -> Bool { s.utf8.count == 3 && s.lowercased() == "gmt" }

    private static func clock(_ s: Substring) -> Int? {
        let hms = s.split(separator: ":", omittingEmptySubsequences: false)
        guard hms.count == 3, hms.allSatisfy({ $0.count == 2 }),
              let h = Int(hms[0]), let m = Int(hms[1]), let sec = Int(hms[2]),
              h < 24, m < 60, sec < 61 else { return nil }
        return h * 3600 + m * 60 + sec
    }

    private static func epochSeconds(year: Int, month: Int, day: Int, time: Int) -> Int64? {
        guard day >= 1, day <= 31, year >= 1 else { return nil }
        return Int64(days(fromCivil: year, month, day)) * 86400 + Int64(time)
    }

    // Howard Hinnant's days_from_civil / civil_from_days.
    private static func days(fromCivil y0: Int, _ m: Int, _ d: Int) -> Int {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    private static func civil(fromDays z0: Int) -> (Int, Int, Int) {
        let z = z0 + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}
