import HTTP1

/// What remains of a request's body, taken from the connection's input as
/// it arrives: a known length, or chunks decoded on the way.
struct RequestBodyReader {
    enum Outcome {
        /// All of `consumed` was body (or chunk framing); more is to come.
        case needMore(consumed: Int)
        /// The body ended after `consumed` bytes; the rest is the next request.
        case done(consumed: Int)
        case invalid(HTTPError)
    }

    private enum State {
        case length(Int)
        case chunked(ChunkedDecoder)
    }

    private var state: State

    /// nil when the request has no body.
    init?(_ framing: BodyFraming, maxBodyBytes: Int) {
        switch framing {
        case .none: return nil
        case .contentLength(let n): state = .length(n)
        case .chunked: state = .chunked(ChunkedDecoder(maxBodyBytes: maxBodyBytes))
        }
    }

    /// A body of length 0: complete before any byte arrives.
    var isEmpty: Bool {
        if case .length(0) = state { return true }
        return false
    }

    /// Hands the body bytes in `input` to `deliver`.
    mutating func feed(_ input: UnsafeRawBufferPointer, _ deliver: (UnsafeRawBufferPointer) -> Void) -> Outcome {
        switch state {
        case .length(let remaining):
            let n = min(remaining, input.count)
            deliver(UnsafeRawBufferPointer(rebasing: input[0..<n]))
            state = .length(remaining - n)
            return remaining == n ? .done(consumed: n) : .needMore(consumed: n)
        case .chunked(var decoder):
            let outcome = decoder.decode(input, sink: deliver)
            state = .chunked(decoder)
            switch outcome {
            case .needMore: return .needMore(consumed: input.count)
            case .done(let consumed): return .done(consumed: consumed)
            case .invalid(let error): return .invalid(error)
            }
        }
    }
}
