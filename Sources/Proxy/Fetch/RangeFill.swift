import CacheSemantics

/// Whether a stored piece of a range the client asked for brings a fetch
/// of the whole behind it (`range_fill`), so that the ranges that follow
/// are hits: only a piece of a larger representation, fetched for a
/// client's Range (a piece's completion, or a whole, needs none), and
/// only when the whole fits the tiers that take it.
enum RangeFill {
    static func wanted(enabled: Bool, clientAskedRange: Bool, stored piece: PartialContent.Piece, largestBody: Int) -> Bool {
        enabled && clientAskedRange && !piece.isWhole && piece.length <= largestBody
    }
}
