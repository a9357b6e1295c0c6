/// Stored partial content (RFC 9111 sections 3.3 and 3.4): a 206 with one
/// byte range of a representation whose complete length it states is
/// kept as a piece, answers the ranges it holds, and joins a later piece
/// of the same representation (the same strong validator) that touches
/// it; pieces that make up the whole representation become a 200.
public enum PartialContent {
    /// The bytes a stored 206 holds: `first...last` of `length`.
    public struct Piece: Equatable, Sendable {
        public var first: Int
        public var last: Int
        public var length: Int

        public init(first: Int, last: Int, length: Int) {
            self.first = first
            self.last = last
            self.length = length
        }

        public var count: Int { last - first + 1 }
        /// The piece is the whole representation.
        public var isWhole: Bool { first == 0 && last == length - 1 }
        /// Its Content-Range value.
        public var contentRange: String { "bytes \(first)-\(last)/\(length)" }
    }

    /// The piece a 206's Content-Range describes (`bytes 4-9/10`); nil for
    /// anything else: no field, another unit, an unknown complete length
    /// (`/*`), a range outside the length, or more than one field (a
    /// multipart/byteranges 206 has none: its parts have theirs).
    public static func piece(contentRange: String?) -> Piece? {
        guard let value = contentRange?.trimmingWhitespaceAndTabs(), value.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = value.dropFirst(6).trimmingWhitespace()
        guard let dash = spec.firstIndex(of: "-"), let slash = spec.firstIndex(of: "/"), dash < slash,
              let first = number(spec[..<dash]), let last = number(spec[spec.index(after: dash)..<slash]),
              let length = number(spec[spec.index(after: slash)...]),
              first <= last, last < length else { return nil }
        return Piece(first: first, last: last, length: length)
    }

    /// What a stored piece does for a request's Range (and If-Range).
    public enum Answer: Equatable, Sendable {
        /// 206 with bytes `first...last` of the representation.
        case partial(first: Int, last: Int)
        /// 416: the range lies beyond the representation's length.
        case unsatisfiable
        /// The piece does not hold what is asked (or no range is asked):
        /// the request goes upstream.
        case notHeld
    }

    public static func answer(range: String?, ifRange: String?, piece: Piece, etag: String?, lastModified: String?) -> Answer {
        guard range != nil else { return .notHeld }
        switch ByteRange.evaluate(range: range, ifRange: ifRange, length: piece.length, etag: etag, lastModified: lastModified) {
        case .full: return .notHeld
        case .unsatisfiable: return .unsatisfiable
        case .partial(let first, let last):
            return first >= piece.first && last <= piece.last ? .partial(first: first, last: last) : .notHeld
        }
    }

    /// Whether two pieces may be joined (section 3.4): the same complete
    /// length and the same strong validator (a weak or missing ETag could
    /// name different bytes), and no gap between them.
    public static func mayJoin(_ a: Piece, etag aTag: String?, _ b: Piece, etag bTag: String?) -> Bool {
        guard a.length == b.length, let aTag, let bTag, !aTag.hasPrefix("W/"), aTag == bTag else { return false }
        return a.first <= b.last + 1 && b.first <= a.last + 1
    }

    /// Whether a stored piece stays beside a new one of its variant (a
    /// variant may hold several, so that a player's seeks are hits): both
    /// of one representation (the same complete length and strong ETag)
    /// and apart (pieces that overlap or touch are joined instead).
    public static func staysBeside(_ new: Piece, etag: String?, stored: Piece, etag storedTag: String?) -> Bool {
        guard new.length == stored.length, let etag, let storedTag, !etag.hasPrefix("W/"), etag == storedTag else { return false }
        return stored.last + 1 < new.first || new.last + 1 < stored.first
    }

    /// Pieces a variant keeps at most; beyond, the oldest go.
    public static let maxPiecesPerVariant = 8

    /// The piece covering both (they may join).
    public static func joined(_ a: Piece, _ b: Piece) -> Piece {
        Piece(first: min(a.first, b.first), last: max(a.last, b.last), length: a.length)
    }

    /// The fields that ask for what a stored piece lacks of `wanted` (the
    /// whole, for a request without Range: cache-tests'
    /// `partial-store-partial-complete`; or a client's range that reaches
    /// past the piece, as a player's next range does): `Range` for those
    /// bytes (two ranges when the piece lies inside: the upstream answers
    /// them as a multipart/byteranges 206), and `If-Range` with its strong
    /// ETag, so that a changed representation comes whole (200) instead.
    /// Without a strong ETag, no If-Range: a rest that comes cannot be
    /// joined (nothing shows it is the same representation) and what was
    /// wanted is asked for then, while an upstream that answers the whole
    /// at once costs nothing more. Nil when the piece holds all of
    /// `wanted`, or none of it.
    public static func restRequest(for piece: Piece, wanted: Piece? = nil, etag: String?) -> (range: String, ifRange: String?)? {
        let gaps = gaps(of: piece, wanted: wanted)
        guard !gaps.isEmpty else { return nil }
        let specs = gaps.map { $0.last == piece.length - 1 ? "\($0.first)-" : "\($0.first)-\($0.last)" }
        return ("bytes=" + specs.joined(separator: ","), etag.flatMap { $0.hasPrefix("W/") ? nil : $0 })
    }

    /// The bytes of `wanted` (by default the whole) that a stored piece
    /// lacks, in order: one range when it holds the start or the end of
    /// what is wanted, two when it lies inside. Empty when it holds all of
    /// it or none.
    public static func gaps(of piece: Piece, wanted: Piece? = nil) -> [Piece] {
        if let rest = rest(of: piece, wanted: wanted) { return [rest] }
        let wanted = wanted ?? Piece(first: 0, last: piece.length - 1, length: piece.length)
        guard wanted.length == piece.length, wanted.first < piece.first, piece.last < wanted.last else { return [] }
        return [Piece(first: wanted.first, last: piece.first - 1, length: piece.length),
                Piece(first: piece.last + 1, last: wanted.last, length: piece.length)]
    }

    /// The bytes of `wanted` (by default the whole) that a stored piece
    /// lacks, when they are one range: the piece holds the start or the
    /// end of what is wanted. Nil otherwise.
    public static func rest(of piece: Piece, wanted: Piece? = nil) -> Piece? {
        let wanted = wanted ?? Piece(first: 0, last: piece.length - 1, length: piece.length)
        guard wanted.length == piece.length, wanted.first >= 0, wanted.first <= wanted.last, wanted.last < wanted.length else {
            return nil
        }
        if piece.first <= wanted.first, wanted.first <= piece.last, piece.last < wanted.last {
            return Piece(first: piece.last + 1, last: wanted.last, length: piece.length)
        }
        if wanted.first < piece.first, piece.first <= wanted.last, wanted.last <= piece.last {
            return Piece(first: wanted.first, last: piece.first - 1, length: piece.length)
        }
        return nil
    }

    /// Whether a 206's piece is exactly the rest `restRequest` asked for.
    public static func isRest(_ answer: Piece, of piece: Piece, wanted: Piece? = nil) -> Bool {
        rest(of: piece, wanted: wanted) == answer
    }

    /// The single range a request's `Range` asks of a representation that
    /// `piece` is part of (its `If-Range` holding against the piece's
    /// validators); nil for none, several, or one that cannot be met.
    public static func wanted(range: String?, ifRange: String?, piece: Piece, etag: String?, lastModified: String?) -> Piece? {
        guard range != nil,
              case .partial(let first, let last) = ByteRange.evaluate(range: range, ifRange: ifRange, length: piece.length, etag: etag,
                                                                       lastModified: lastModified) else { return nil }
        return Piece(first: first, last: last, length: piece.length)
    }

    /// Whether an upstream 206 (its `Content-Range` and `ETag`) completes a
    /// stored piece (its `etag`): exactly the rest, of the same
    /// representation by a strong validator (section 3.4). An upstream that
    /// ignores If-Range may send the rest of a newer version: joined, the
    /// client would get a body spliced from two.
    public static func completes(_ piece: Piece, wanted: Piece? = nil, etag: String?, contentRange: String?, restETag: String?) -> Bool {
        guard let rest = self.piece(contentRange: contentRange), isRest(rest, of: piece, wanted: wanted) else { return false }
        return mayJoin(piece, etag: etag, rest, etag: restETag)
    }

    /// Whether an upstream 206 may complete a stored piece that lies
    /// inside what is wanted (two ranges asked for): of the same
    /// representation by a strong validator, either multipart/byteranges
    /// (its parts are checked as they stream: `PieceAssembly`) or one
    /// range that holds both gaps (an upstream may coalesce ranges,
    /// RFC 9110 section 14.2).
    public static func mayCompleteAround(_ piece: Piece, wanted: Piece? = nil, etag: String?, contentRange: String?,
                                         contentType: String?, restETag: String?) -> Bool {
        guard let etag, !etag.hasPrefix("W/"), etag == restETag else { return false }
        let gaps = gaps(of: piece, wanted: wanted)
        guard gaps.count == 2 else { return false }
        if let one = self.piece(contentRange: contentRange) {
            return one.length == piece.length && one.first <= gaps[0].first && gaps[1].last <= one.last
        }
        return contentRange == nil && MultipartByteranges.boundary(contentType: contentType) != nil
    }

    /// The contiguous pieces the parts of one multipart 206 make, by first
    /// byte: parts that overlap or touch are joined (one response holds one
    /// representation, whatever its validator). `parts`: the indices of
    /// the parts each holds, in the order they came.
    public static func segments(of parts: [Piece]) -> [(piece: Piece, parts: [Int])] {
        var segments: [(piece: Piece, parts: [Int])] = []
        for index in parts.indices.sorted(by: { parts[$0].first < parts[$1].first }) {
            let part = parts[index]
            if let last = segments.last, part.first <= last.piece.last + 1 {
                segments[segments.count - 1] = (joined(last.piece, part), (last.parts + [index]).sorted())
            } else {
                segments.append((part, [index]))
            }
        }
        return segments
    }

    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }
}
