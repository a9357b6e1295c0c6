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
        guard let sets = sets(of: range), sets.count == 1, let spec = spec(sets[0]) else { return .full }
        switch spec {
        case .suffix(let n):
            // The last n bytes.
            if n == 0 || length == 0 { return .unsatisfiable }
            return .partial(first: max(0, length - n), last: length - 1)
        case .span(let first, let last):
            if first >= length { return .unsatisfiable }
            return .partial(first: first, last: min(last ?? length - 1, length - 1))
        }
    }

    /// At most this many ranges in one request are passed upstream.
    public static let maxForwardedRanges = 16

    /// Whether a Range asking for several byte ranges may go upstream as
    /// asked (RFC 9110 section 14.2 lets a server refuse the rest): at most
    /// `maxForwardedRanges`, each well formed, in ascending order without
    /// overlap (a suffix or open range only last). Anything else (many small
    /// or overlapping ranges make an answer larger than the whole) is
    /// fetched whole instead, and answered with the whole.
    public static func mayForwardSeveral(_ range: String) -> Bool {
        guard let sets = sets(of: range), sets.count <= maxForwardedRanges else { return false }
        var next = 0, ended = false
        for set in sets {
            guard !ended, let spec = spec(set) else { return false }
            switch spec {
            case .suffix(let n):
                guard n < beyondAnyLength else { return false }  // too large to pass on as written
                ended = true
            case .span(let first, let last):
                guard first >= next, first < beyondAnyLength, (last ?? 0) < beyondAnyLength else { return false }
                if let last { next = last + 1 } else { ended = true }
            }
        }
        return true
    }

    /// One byte-range-spec: `first-last` or `first-` (`last` nil), or `-n`.
    private enum Spec {
        case span(first: Int, last: Int?)
        case suffix(Int)
    }

    /// The specs of a `bytes=` Range, as written; nil for another unit.
    private static func sets(of range: String) -> [Substring]? {
        let value = range.trimmingWhitespaceAndTabs()
        guard value.lowercased().hasPrefix("bytes=") else { return nil }
        return value.dropFirst(6).split(separator: ",", omittingEmptySubsequences: false)
    }

    /// nil when malformed, or when `last` is before `first`.
    private static func spec(_ text: Substring) -> Spec? {
        let set = text.trimmingWhitespace()
        guard let dash = set.firstIndex(of: "-") else { return nil }
        let firstText = set[..<dash], lastText = set[set.index(after: dash)...]
        if firstText.isEmpty { return digits(lastText).map { .suffix($0) } }
        guard let first = digits(firstText) else { return nil }
        if lastText.isEmpty { return .span(first: first, last: nil) }
        guard let last = digits(lastText), last >= first else { return nil }
        return .span(first: first, last: last)
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

    /// A position past any representation: longer numbers read as it. A
    /// last-pos or suffix-length may exceed the length (section 14.1.2:
    /// `bytes=0-99999999999999999999` is all of it); a first-pos that does
    /// is unsatisfiable.
    static let beyondAnyLength = 1 << 62

    private static func digits<S: StringProtocol>(_ s: S) -> Int? {
        guard !s.isEmpty else { return nil }
        var value = 0
        for c in s.utf8 {
            guard c >= 0x30 && c <= 0x39 else { return nil }
            value = value > (beyondAnyLength - 9) / 10 ? beyondAnyLength : min(value * 10 + Int(c - 0x30), beyondAnyLength)
        }
        return value
    }
}

extension String {
    func trimmingWhitespaceAndTabs() -> String { Substring(self).trimmingWhitespace() }
}
