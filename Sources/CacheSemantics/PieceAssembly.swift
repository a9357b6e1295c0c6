/// What a client gets of a stored piece completed by an upstream 206 that
/// comes in parts (RFC 9111 section 3.4): the bytes it wants, in order,
/// from the parts and the stored piece, each byte once. Told each part as
/// it begins and how much of its data came, it answers which stored bytes
/// go first and which of the data go on; bytes a part repeats (an upstream
/// that coalesced ranges over the piece) are skipped. A part that starts
/// past the next byte wanted, when the piece does not hold it, is a gap:
/// the answer cannot be whole.
public struct PieceAssembly: Equatable, Sendable {
    public let held: PartialContent.Piece
    public let wanted: PartialContent.Piece
    /// The next byte the client needs.
    public private(set) var next: Int
    /// The position of the current part's next byte; nil before a part.
    private var partAt: Int?
    public private(set) var failed = false

    public init(held: PartialContent.Piece, wanted: PartialContent.Piece) {
        (self.held, self.wanted, next) = (held, wanted, wanted.first)
    }

    /// A part holding `piece` begins: the stored bytes that go before it
    /// (nil for none).
    public mutating func partBegins(_ piece: PartialContent.Piece) -> PartialContent.Piece? {
        guard !failed, !isDone else { partAt = nil; return nil }
        guard piece.length == held.length else { failed = true; return nil }
        let stored = piece.first > next ? storedFromNext(through: piece.first - 1) : nil
        if piece.first > next { failed = true; return nil }
        partAt = piece.first
        return stored
    }

    /// Whether a part holding `piece` starts past what the client can have
    /// before it (the next byte wanted, or the stored piece's end when it
    /// holds the next): an upstream that sent its parts in another order
    /// than asked (RFC 9110 section 14.6 says SHOULD) sent it early.
    public func comesLater(_ piece: PartialContent.Piece) -> Bool {
        guard !failed, !isDone, piece.length == held.length else { return false }
        let reachable = held.first <= next && next <= held.last ? held.last + 1 : next
        return piece.first > reachable && piece.first <= wanted.last
    }

    /// `count` more bytes of the current part came: the offsets among them
    /// the client gets.
    public mutating func take(_ count: Int) -> Range<Int> {
        guard let at = partAt, !failed else { return 0..<0 }
        partAt = at + count
        let from = max(next, at), to = min(at + count, wanted.last + 1)
        guard from < to else { return 0..<0 }
        next = to
        return (from - at)..<(to - at)
    }

    /// The upstream's body is over: the stored bytes that end the answer
    /// (nil for none). `isDone` says whether the client then has it all.
    public mutating func finish() -> PartialContent.Piece? {
        guard !failed, !isDone else { return nil }
        return storedFromNext(through: wanted.last)
    }

    /// What came cannot be put together (an upstream body not well
    /// formed): the answer is not whole, unless the client has it all.
    public mutating func fail() { failed = !isDone }

    /// The client has every byte it wants.
    public var isDone: Bool { next > wanted.last }

    /// The stored bytes from the next wanted up to `last` (or the piece's
    /// end), when the piece holds the next: the next moves past them.
    private mutating func storedFromNext(through last: Int) -> PartialContent.Piece? {
        guard held.first <= next, next <= held.last else { return nil }
        let sent = PartialContent.Piece(first: next, last: min(last, held.last, wanted.last), length: held.length)
        next = sent.last + 1
        return sent
    }
}
