/// A response stream's bytes handed to libnghttp3 and so to ngtcp2, kept
/// until the client acknowledged them (either may send them again): pieces
/// of at most `pieceBytes`, freed as acknowledgements pass their end.
final class StreamOutput {
    static let pieceBytes = 16 << 10
    private var pieces: [(bytes: UnsafeMutableRawBufferPointer, count: Int)] = []
    /// Bytes of the first piece already acknowledged.
    private var acknowledged = 0

    /// A piece to fill (`count` bytes of it are then used, via `keep`).
    func newPiece() -> UnsafeMutableRawBufferPointer { .allocate(byteCount: Self.pieceBytes, alignment: 16) }

    func keep(_ piece: UnsafeMutableRawBufferPointer, count: Int) { pieces.append((piece, count)) }

    /// The client acknowledged `count` more bytes, in order.
    func acknowledge(_ count: Int) {
        var left = count
        while left > 0, let first = pieces.first {
            let rest = first.count - acknowledged
            if left < rest {
                acknowledged += left
                return
            }
            left -= rest
            first.bytes.deallocate()
            pieces.removeFirst()
            acknowledged = 0
        }
    }

    /// The bytes held (not yet acknowledged).
    var heldBytes: Int { pieces.reduce(0) { $0 + $1.count } - acknowledged }

    func release() {
        for piece in pieces { piece.bytes.deallocate() }
        pieces.removeAll()
        acknowledged = 0
    }
}
