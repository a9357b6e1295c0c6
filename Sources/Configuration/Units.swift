/// SIZE and duration values as docs/running.md ("Sizes and durations") spells them.
public enum Units {
    /// `512KiB`, `256MiB`, `10GiB`, `1TiB`, `KB`/`MB`/`GB` (decimal) or plain bytes.
    public static func parseSize(_ text: String) -> Int? {
        let s = text.trimmingCharacters()
        let suffixes: [(String, Int)] = [
            ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40),
            ("KB", 1_000), ("MB", 1_000_000), ("GB", 1_000_000_000), ("TB", 1_000_000_000_000),
            ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("B", 1),
        ]
        for (suffix, factor) in suffixes where s.hasSuffix(suffix) {
            guard let n = Int(s.dropLast(suffix.count).trimmingCharacters()), n >= 0 else { return nil }
            let (product, overflow) = n.multipliedReportingOverflow(by: factor)
            return overflow ? nil : product
        }
        guard let n = Int(s), n >= 0 else { return nil }
        return n
    }

    /// Durations beyond ten years are refused: nothing here needs them, and
    /// timers add them to the clock.
    public static let maxDurationMilliseconds = 10 * 365 * 86_400_000

    /// `90s`, `5m`, `2h`, `7d`, `250ms`; plain numbers are seconds. Milliseconds.
    public static func parseDurationMilliseconds(_ text: String) -> Int? {
        guard let ms = parseUnboundedDurationMilliseconds(text), ms <= maxDurationMilliseconds else { return nil }
        return ms
    }

    private static func parseUnboundedDurationMilliseconds(_ text: String) -> Int? {
        let s = text.trimmingCharacters()
        let suffixes: [(String, Int)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        for (suffix, factor) in suffixes where s.hasSuffix(suffix) {
            guard let n = Int(s.dropLast(suffix.count)), n >= 0 else { return nil }
            let (product, overflow) = n.multipliedReportingOverflow(by: factor)
            return overflow ? nil : product
        }
        guard let n = Int(s), n >= 0 else { return nil }
        let (product, overflow) = n.multipliedReportingOverflow(by: 1000)
        return overflow ? nil : product
    }

    public static let graceExpectation = "expected a duration of at least 1s such as \"1h\" or \"30m\", or \"0\" (off)"

    /// `stale_on_disconnect`: a duration in seconds, or `0`/`off` for none.
    public static func parseGraceSeconds(_ text: String) -> Int? {
        if text.trimmingCharacters().lowercased() == "off" { return 0 }
        guard let ms = parseDurationMilliseconds(text), ms == 0 || ms >= 1000 else { return nil }  // 500ms is not "off"
        return ms / 1000
    }

    public static let staleTimeoutExpectation = "expected a duration such as \"3s\" or \"500ms\", or \"off\""

    /// `stale_timeout`: milliseconds, or `0`/`off` for none.
    public static func parseStaleTimeoutMilliseconds(_ text: String) -> Int? {
        if text.trimmingCharacters().lowercased() == "off" { return 0 }
        return parseDurationMilliseconds(text)
    }

    /// The preset lifetimes, in seconds; a `[presets]` table changes them.
    public static let defaultPresets: [String: Int] = ["short": 300, "medium": 3_600, "long": 86_400, "max": 30 * 86_400]

    /// A lifetime: a duration, or a preset (`short` 5m, `medium` 1h, `long`
    /// 1d, `max` 30d unless configured otherwise, `never`). `.some(nil)`
    /// means never expires.
    public static func parseLifetimeSeconds(_ text: String, presets: [String: Int] = defaultPresets) -> Int?? {
        let name = text.trimmingCharacters().lowercased()
        if name == "never" { return .some(nil) }
        if let preset = presets[name] { return .some(preset) }
        switch name {
        default:
            guard let ms = parseDurationMilliseconds(text), ms >= 1000 else { return nil }
            return .some(ms / 1000)
        }
    }

    /// "HOST:PORT" or "[v6]:PORT".
    public static func parseHostPort(_ text: String) -> (host: String, port: UInt16)? {
        let s = text.trimmingCharacters()
        if s.hasPrefix("[") {
            guard let close = s.firstIndex(of: "]") else { return nil }
            let host = String(s[s.index(after: s.startIndex)..<close])
            let rest = s[s.index(after: close)...]
            guard rest.hasPrefix(":"), let port = UInt16(rest.dropFirst()), !host.isEmpty else { return nil }
            return (host, port)
        }
        guard let colon = s.lastIndex(of: ":") else { return nil }
        let host = String(s[..<colon])
        guard !host.isEmpty, !host.contains(":"), let port = UInt16(s[s.index(after: colon)...]) else { return nil }
        return (host, port)
    }

    /// An upstream base URL: http or https, with a host, no query or fragment.
    public static func validUpstream(_ text: String) -> Bool {
        let lower = text.lowercased()
        let rest: Substring
        if lower.hasPrefix("http://") { rest = text.dropFirst(7) }
        else if lower.hasPrefix("https://") { rest = text.dropFirst(8) }
        else { return false }
        let authority = rest.prefix { $0 != "/" }
        guard !authority.isEmpty, !text.contains("?"), !text.contains("#"), !text.contains(" "), !authority.contains("@")
        else { return false }
        // HOST, HOST:PORT, [IPv6] or [IPv6]:PORT, with a port of 1-65535.
        var hostPart = Substring(authority), port: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return false }
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return false }
                port = after.dropFirst()
            }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            guard !hostPart.isEmpty, hostPart.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return false }
        } else {
            if let colon = authority.lastIndex(of: ":") {
                port = authority[authority.index(after: colon)...]
                hostPart = authority[..<colon]
            }
            guard !hostPart.isEmpty,
                  hostPart.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_") })
            else { return false }
        }
        if let port {
            guard let n = Int(port), (1...65535).contains(n) else { return false }
        }
        return true
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    public func trimmingCharacters() -> String { trimming { $0 == " " || $0 == "\t" } }

    /// Without leading and trailing white space and line breaks.
    public func trimmingWhitespace() -> String { trimming(\.isWhitespace) }

    private func trimming(_ isTrimmed: (Character) -> Bool) -> String {
        var s = Substring(self)
        while let f = s.first, isTrimmed(f) { s = s.dropFirst() }
        while let l = s.last, isTrimmed(l) { s = s.dropLast() }
        return String(s)
    }
}

/// Percent-encodes every byte of `s` but ASCII letters, digits and `keeping`.
public func percentEncoded(_ s: String, keeping: String) -> String {
    var out: [UInt8] = []
    let hex = Array("0123456789ABCDEF".utf8)
    for byte in s.utf8 {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            out.append(byte)
        case _ where keeping.utf8.contains(byte):
            out.append(byte)
        default:
            out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
        }
    }
    return String(decoding: out, as: UTF8.self)
}

/// `value` with `digits` decimals, as `printf("%.*f")` writes it (but
/// halves round away from zero; printf rounds exact halves to even).
public func fixedPoint(_ value: Double, digits: Int) -> String {
    guard value.isFinite else { return value.isNaN ? "nan" : (value < 0 ? "-inf" : "inf") }
    var scale: UInt64 = 1
    for _ in 0..<digits { scale *= 10 }
    let scaled = (value.magnitude * Double(scale)).rounded()
    guard scaled < 9.0e18 else { return String(value) }
    let units = UInt64(scaled)
    var text = (value < 0 && units != 0 ? "-" : "") + String(units / scale)
    if digits > 0 {
        let fraction = String(units % scale)
        text += "." + String(repeating: "0", count: digits - fraction.count) + fraction
    }
    return text
}

/// `n` with at least two digits (`07`).
public func twoDigits(_ n: Int) -> String { n >= 0 && n < 10 ? "0\(n)" : String(n) }

/// "unknown ... key" messages: the nearest known name when one is close
/// (a typo), then every known name.
public enum UnknownKey {
    public static func message(_ kind: String, _ key: String, known: [String]) -> String {
        let hint = closest(key, among: known).map { "did you mean \($0)? " } ?? ""
        return "unknown \(kind) (\(hint)known: \(known.joined(separator: ", ")))"
    }

    /// The known name nearest to `word` by edits (insert, delete, replace
    /// or swap two neighbours), if within a third of its length (at least 1, at most 3).
    public static func closest(_ word: String, among known: [String]) -> String? {
        let limit = min(3, max(1, word.count / 3))
        var best: (name: String, distance: Int)?
        for name in known {
            let d = distance(Array(word.lowercased().utf8), Array(name.utf8))
            if d <= limit && d < (best?.distance ?? .max) { best = (name, d) }
        }
        return best?.name
    }

    /// Optimal string alignment distance.
    public static func distance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }
}
