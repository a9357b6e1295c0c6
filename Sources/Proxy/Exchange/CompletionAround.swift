import CacheSemantics

/// A stored piece completed around (it lies inside what the client
/// wants): the upstream's 206, multipart/byteranges or one range that
/// coalesced both sides, read as it streams (`MultipartStream`), and the
/// piece's bytes, put in the client's order (`PieceAssembly`). A part that
/// comes before its turn (the upstream reordered them, as RFC 9110 lets
/// it) is held, up to `maxHeldBytes`, and goes out once its turn comes.
/// A value the exchange's machine holds (in its `Forwarding`) while the
/// body streams, and feeds (`ExchangeMachine.assemble`).
struct CompletionAround {
    enum Output {
        /// Upstream bytes, valid during the call.
        case upstream(UnsafeRawBufferPointer)
        /// These bytes of the stored piece.
        case stored(PartialContent.Piece)
    }

    /// Parts held for their turn, all together (beyond: the answer is cut).
    static let maxHeldBytes = 8 << 20

    let completion: Completion
    private var stream: MultipartStream?
    private var assembly: PieceAssembly
    /// Parts that came early, their data so far; the last one may still be coming.
    private var early: [(piece: PartialContent.Piece, bytes: [UInt8])] = []
    private var holding = false
    private var heldBytes = 0
    /// What `finish` found, once it was asked.
    private var finished: Bool?

    /// `contentRange`, `contentType`: the upstream 206's.
    init(_ completion: Completion, contentRange: String?, contentType: String?) {
        self.completion = completion
        assembly = PieceAssembly(held: completion.held, wanted: completion.wanted)
        if let one = PartialContent.piece(contentRange: contentRange) {
            // It holds both sides (`PartialContent.mayCompleteAround`): nothing stored goes first.
            _ = assembly.partBegins(one)
        } else {
            stream = MultipartStream(boundary: MultipartByteranges.boundary(contentType: contentType) ?? "")
        }
    }

    /// Whether what came cannot make the client's answer (not well formed,
    /// a gap, too much held): nothing of it may be stored either.
    var failed: Bool { assembly.failed }

    /// Upstream body bytes: what goes to the client, in order.
    mutating func take(_ bytes: UnsafeRawBufferPointer, _ send: (Output) -> Void) {
        // Moved out while it reads: its events change the rest of this value.
        guard var stream = self.stream.take() else { return pass(bytes, send) }
        defer { self.stream = stream }
        let wellFormed = stream.consume(bytes) { event in
            switch event {
            case .part(let piece, _):
                holding = false
                replayEarly(send)
                if assembly.comesLater(piece) {
                    holding = true
                    early.append((piece, []))
                } else if let stored = assembly.partBegins(piece) {
                    send(.stored(stored))
                }
            case .data(let data):
                guard holding else { return pass(data, send) }
                heldBytes += data.count
                if heldBytes > Self.maxHeldBytes { return assembly.fail() }
                early[early.count - 1].bytes += data
            }
        }
        if !wellFormed { assembly.fail() }
    }

    /// The upstream's body is over: the parts held and the stored bytes
    /// that end the answer, if any; true when the client then has all it wants.
    mutating func finish(_ send: (Output) -> Void) -> Bool {
        if let finished { return finished }
        holding = false
        replayEarly(send)
        if let stored = assembly.finish() { send(.stored(stored)) }
        let whole = assembly.isDone && !assembly.failed && early.isEmpty
        finished = whole
        return whole
    }

    /// Held parts whose turn has come, in their order.
    private mutating func replayEarly(_ send: (Output) -> Void) {
        while let i = early.indices.min(by: { early[$0].piece.first < early[$1].piece.first }),
              !assembly.failed, !assembly.comesLater(early[i].piece) {
            let (piece, bytes) = early.remove(at: i)
            heldBytes -= bytes.count
            if let stored = assembly.partBegins(piece) { send(.stored(stored)) }
            bytes.withUnsafeBytes { pass($0, send) }
        }
    }

    private mutating func pass(_ data: UnsafeRawBufferPointer, _ send: (Output) -> Void) {
        let taken = assembly.take(data.count)
        if !taken.isEmpty { send(.upstream(UnsafeRawBufferPointer(rebasing: data[taken]))) }
    }
}
