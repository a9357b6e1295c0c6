/// Range requests served from a complete stored response (RFC 9110 section 14).
public enum ByteRange {
    /// What to send for a Range request against a representation of `length` bytes.
    public enum Outcome: Equatable, Sendable {
        /// Ignore the Range: send the whole representation (200). Used for
        /// invalid syntax, other units and multiple ranges, as section 14.2 allows.
        case full
        /// 206 with bytes first...last (inclusive).
        case partial(first: Int, last: Int)
        /// 416 Range Not Satisfiable.
        case unsatisfiable
    }

    /// Evaluates `Range` (and `If-Range`, section 13.1.5) for a stored 200.
    public static func evaluate(range: String?, ifRange: String?, length: Int,
                                etag: String?, lastModified: String?) -> Outcome {
        guard let range else { return .full }
        if let ifRange, !ifRangeHolds(ifRange, etag: etag, lastModified: lastModified) { return .full }
        let spec = range.trimmingWhitespaceAndTabs()
        guard spec.lowercased().hasPrefix("bytes=") else { return .full }
        let sets = spec.dropFirst(6).split(separator: ",", omittingEmptySubsequences: false)
        guard sets.count == 1 else { return .full }
        let set = sets[0].trimmingWhitespace()
        guard let dash = set.firstIndex(of: "-") else { return .full }
        let firstText = set[..<dash], lastText = set[set.index(after: dash)...]
        if firstText.isEmpty {
            // Suffix range: the last N bytes.
            guard let n = digits(lastText) else { return .full }
            if n == 0 || length == 0 { return .unsatisfiable }
            return .partial(first: max(0, length - n), last: length - 1)
        }
        guard let first = digits(firstText) else { return .full }
        var last = length - 1
        if !lastText.isEmpty {
            guard let l = digits(lastText), l >= first else { return .full }
            last = min(l, length - 1)
        }
        if first >= length { return .unsatisfiable }
        return .partial(first: first, last: last)
    }

    /// At most this many ranges in one request are passed upstream.
    public static let maxForwardedRanges = 16

    /// Whether a Range asking for several byte ranges may go upstream as
    /// asked (RFC 9110 section 14.2 lets a server refuse the rest): at most
    /// `maxForwardedRanges`, each well formed, in ascending order without
    /// overlap (a suffix range only last). Anything else (many small or
    /// overlapping ranges make an answer larger than the whole) is fetched
    /// whole instead, and answered with the whole.
    public static func mayForwardSeveral(_ range: String) -> Bool {
        let spec = range.trimmingWhitespaceAndTabs()
        guard spec.lowercased().hasPrefix("bytes=") else { return false }
        let sets = spec.dropFirst(6).split(separator: ",", omittingEmptySubsequences: false)
        guard sets.count <= maxForwardedRanges else { return false }
        var next = 0, suffixSeen = false
        for set in sets {
            let set = set.trimmingWhitespace()
            guard !suffixSeen, let dash = set.firstIndex(of: "-") else { return false }
            let firstText = set[..<dash], lastText = set[set.index(after: dash)...]
            if firstText.isEmpty {
                guard digits(lastText) != nil else { return false }
                suffixSeen = true
                continue
            }
            guard let first = digits(firstText), first >= next else { return false }
            if lastText.isEmpty {
                suffixSeen = true  // to the end: nothing may follow
                continue
            }
            guard let last = digits(lastText), last >= first else { return false }
            next = last + 1
        }
        return true
    }

    /// If-Range holds when it is a strong ETag equal to the stored one, or an
    /// HTTP-date equal to the stored Last-Modified.
    static func ifRangeHolds(_ value: String, etag: String?, lastModified: String?) -> Bool {
        let v = value.trimmingWhitespaceAndTabs()
        if v.hasPrefix("\"") { return etag.map { !$0.hasPrefix("W/") && $0 == v } ?? false }
        if v.hasPrefix("W/") { return false }
        guard let date = HTTPDate.parse(v), let lm = lastModified.flatMap(HTTPDate.parse) else { return false }
        return date == lm
    }

    private static func digits<S: StringProtocol>(_ s: S) -> Int? {
        guard !s.isEmpty, s.utf8.count <= 18, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(s)
    }
}

extension String {
    func trimmingWhitespaceAndTabs() -> String { Substring(self).trimmingWhitespace() }
}
