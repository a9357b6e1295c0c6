import CacheSemantics

/// A stored piece completed around (it lies inside what the client
/// wants): the upstream's 206, multipart/byteranges or one range that
/// coalesced both sides, read as it streams (`MultipartStream`), and the
/// piece's bytes, put in the client's order (`PieceAssembly`). A class:
/// the exchange's `Forwarding` holds it while the body streams.
final class CompletionAround {
    enum Output {
        /// Upstream bytes, valid during the call.
        case upstream(UnsafeRawBufferPointer)
        /// These bytes of the stored piece.
        case stored(PartialContent.Piece)
    }

    let completion: Completion
    private var stream: MultipartStream?
    private var assembly: PieceAssembly

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

    /// Upstream body bytes: what goes to the client, in order.
    func take(_ bytes: UnsafeRawBufferPointer, _ send: (Output) -> Void) {
        guard stream != nil else { return pass(bytes, send) }
        let wellFormed = stream!.consume(bytes) { event in
            switch event {
            case .part(let piece, _):
                if let stored = assembly.partBegins(piece) { send(.stored(stored)) }
            case .data(let data):
                pass(data, send)
            }
        }
        if !wellFormed { assembly.fail() }
    }

    /// The upstream's body is over: the stored bytes that end the answer,
    /// if any; true when the client then has all it wants.
    func finish(_ send: (Output) -> Void) -> Bool {
        if let stored = assembly.finish() { send(.stored(stored)) }
        return assembly.isDone && !assembly.failed
    }

    private func pass(_ data: UnsafeRawBufferPointer, _ send: (Output) -> Void) {
        let taken = assembly.take(data.count)
        if !taken.isEmpty { send(.upstream(UnsafeRawBufferPointer(rebasing: data[taken]))) }
    }
}
