/// Incremental decoder for the chunked transfer coding (RFC 9112 section 7.1).
///
/// Feed it bytes as they arrive; it hands decoded body bytes to the sink
/// (as slices of the input, no copy) and reports how much input it used.
public struct ChunkedDecoder: Sendable {
    public enum Outcome: Equatable, Sendable {
        /// All input was used; the body continues.
        case needMore
        /// The last chunk and trailers ended after `consumed` bytes of this input.
        case done(consumed: Int)
        case invalid(HTTPError)
    }

    private enum State: Sendable {
        case size, extensions, sizeLF, data, dataCR, dataLF, trailerLineStart, trailerLine, trailerLF, finalLF, done
    }

    private var state: State = .size
    private var chunkRemaining = 0
    private var sizeDigits = 0
    private var extensionBytes = 0
    private var trailerBytes = 0
    public private(set) var bodyBytes = 0
    private let maxBodyBytes: Int

    /// Bounds on the parts of the framing that are not body.
    static let maxExtensionBytes = 4096
    static let maxTrailerBytes = 16384

    public init(maxBodyBytes: Int) {
        self.maxBodyBytes = maxBodyBytes
    }

    public mutating func decode(_ input: UnsafeRawBufferPointer, sink: (UnsafeRawBufferPointer) -> Void) -> Outcome {
        let b = input.bindMemory(to: UInt8.self)
        var i = 0
        while i < b.count {
            let c = b[i]
            switch state {
            case .size:
                if let v = hexValue(c) {
                    sizeDigits += 1
                    // 15 hex digits keep the size within Int without overflow checks.
                    if sizeDigits > 15 { return .invalid(.badRequest("chunk size too large")) }
                    chunkRemaining = chunkRemaining << 4 | v
                    i += 1
                } else if sizeDigits == 0 {
                    return .invalid(.badRequest("malformed chunk size"))
                } else if c == UInt8(ascii: ";") || c == SP || c == HTAB {
                    state = .extensions
                    i += 1
                } else if c == CR {
                    state = .sizeLF
                    i += 1
                } else if c == LF {
                    i += 1
                    if let error = endOfSizeLine() { return .invalid(error) }
                } else {
                    return .invalid(.badRequest("malformed chunk size"))
                }
            case .extensions:
                extensionBytes += 1
                if extensionBytes > Self.maxExtensionBytes { return .invalid(.badRequest("chunk extension too long")) }
                if c == CR { state = .sizeLF }
                else if c == LF { if let error = endOfSizeLine() { return .invalid(error) } }
                else if c < SP && c != HTAB || c == DEL { return .invalid(.badRequest("invalid chunk extension")) }
                i += 1
            case .sizeLF:
                guard c == LF else { return .invalid(.badRequest("bare CR in chunk size line")) }
                i += 1
                if let error = endOfSizeLine() { return .invalid(error) }
            case .data:
                let n = min(chunkRemaining, b.count - i)
                sink(UnsafeRawBufferPointer(rebasing: input[i..<(i + n)]))
                chunkRemaining -= n
                i += n
                if chunkRemaining == 0 { state = .dataCR }
            case .dataCR:
                if c == CR { state = .dataLF; i += 1 }
                else if c == LF { state = .size; resetSize(); i += 1 }
                else { return .invalid(.badRequest("chunk data longer than its size")) }
            case .dataLF:
                guard c == LF else { return .invalid(.badRequest("missing CRLF after chunk data")) }
                state = .size
                resetSize()
                i += 1
            case .trailerLineStart:
                if c == CR { state = .finalLF; i += 1 }
                else if c == LF { state = .done; return .done(consumed: i + 1) }
                else { state = .trailerLine }
            case .trailerLine:
                trailerBytes += 1
                if trailerBytes > Self.maxTrailerBytes { return .invalid(.headerFieldsTooLarge) }
                if c == CR { state = .trailerLF }
                else if c == LF { state = .trailerLineStart }
                else if c < SP && c != HTAB { return .invalid(.badRequest("invalid character in trailer")) }
                i += 1
            case .trailerLF:
                guard c == LF else { return .invalid(.badRequest("bare CR in trailer")) }
                state = .trailerLineStart
                i += 1
            case .finalLF:
                guard c == LF else { return .invalid(.badRequest("bare CR after last chunk")) }
                state = .done
                return .done(consumed: i + 1)
            case .done:
                return .done(consumed: i)
            }
        }
        return state == .done ? .done(consumed: i) : .needMore
    }

    public var isDone: Bool { state == .done }

    private mutating func endOfSizeLine() -> HTTPError? {
        if chunkRemaining == 0 {
            state = .trailerLineStart
            return nil
        }
        bodyBytes += chunkRemaining
        if bodyBytes > maxBodyBytes { return .contentTooLarge }
        state = .data
        return nil
    }

    private mutating func resetSize() {
        chunkRemaining = 0
        sizeDigits = 0
        extensionBytes = 0
    }

    @inline(__always) private func hexValue(_ c: UInt8) -> Int? {
        switch c {
        case 0x30...0x39: return Int(c - 0x30)
        case 0x41...0x46: return Int(c - 0x41 + 10)
        case 0x61...0x66: return Int(c - 0x61 + 10)
        default: return nil
        }
    }
}
