/// A multipart/byteranges body read as it arrives (`MultipartByteranges`
/// reads a whole one through it): each part's head, then its data as
/// it comes, then the close delimiter. A part's data is taken by the
/// length its Content-Range names, so nothing in it is scanned; the
/// delimiter must follow it at once. Heads (and a preamble) are held
/// until complete, within `MultipartByteranges.maxPartHeaderBytes`.
public struct MultipartStream {
    public enum Event {
        /// A part begins: the bytes of the representation it holds, and its Content-Type.
        case part(PartialContent.Piece, contentType: String?)
        /// Some of the current part's data, valid during the call.
        case data(UnsafeRawBufferPointer)
    }

    private enum State {
        /// Before the first delimiter (a preamble may come first).
        case preamble
        /// A part's data is over: CRLF and the dashed boundary must follow.
        case delimiter
        /// Right after a dashed boundary: `--` closes, else a part's head.
        case afterBoundary
        case data(remaining: Int)
        /// Closed: what follows is epilogue.
        case closed
        case malformed
    }

    private let dashes: [UInt8]
    private var state = State.preamble
    /// Bytes of a head (or delimiter) that is not complete yet.
    private var pending: [UInt8] = []
    private var length: Int?
    public private(set) var partCount = 0

    public init(boundary: String) { dashes = Array("--\(boundary)".utf8) }

    /// The close delimiter came after at least one part.
    public var isComplete: Bool { if case .closed = state { return partCount > 0 } else { return false } }
    /// Something that is not a well-formed multipart/byteranges body came.
    public var isMalformed: Bool { if case .malformed = state { return true } else { return false } }

    /// Reads `bytes`, telling `event` what they hold; false once the body
    /// is known not to be well formed (nothing more is told).
    public mutating func consume(_ bytes: UnsafeRawBufferPointer, _ event: (Event) -> Void) -> Bool {
        if pending.isEmpty {
            let used = step(bytes, event)
            if used < bytes.count { pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[used...])) }
        } else {
            pending.append(contentsOf: bytes)
            let held = pending
            pending = []
            held.withUnsafeBytes { held in
                let used = step(held, event)
                if used < held.count { pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: held[used...])) }
            }
        }
        if pending.count > MultipartByteranges.maxPartHeaderBytes + dashes.count + 4 { state = .malformed }
        if isMalformed { pending = [] }
        return !isMalformed
    }

    /// Takes what it can of `buffer`; the rest (a head not complete yet) waits.
    private mutating func step(_ buffer: UnsafeRawBufferPointer, _ event: (Event) -> Void) -> Int {
        var at = 0
        while at < buffer.count {
            switch state {
            case .data(let remaining):
                let count = min(remaining, buffer.count - at)
                event(.data(UnsafeRawBufferPointer(rebasing: buffer[at..<(at + count)])))
                at += count
                state = count == remaining ? .delimiter : .data(remaining: remaining - count)
            case .closed, .malformed:
                return buffer.count
            case .preamble:
                // The first delimiter opens the body or starts a line of the preamble.
                guard let found = MultipartByteranges.find(dashes, in: buffer, from: at, lineStart: true) else { return at }
                at = found + dashes.count
                state = .afterBoundary
            case .delimiter:
                let needed = 2 + dashes.count
                guard buffer.count - at >= needed else {
                    if !isPrefix(of: [0x0D, 0x0A] + dashes, buffer, at: at) { state = .malformed }
                    return at
                }
                guard MultipartByteranges.starts(with: [0x0D, 0x0A], in: buffer, at: at),
                      MultipartByteranges.starts(with: dashes, in: buffer, at: at + 2) else { state = .malformed; return at }
                at += needed
                state = .afterBoundary
            case .afterBoundary:
                guard let used = head(buffer, from: at, event) else { return at }
                at = used
            }
        }
        return at
    }

    /// After a dashed boundary: the close delimiter, or transport padding,
    /// CRLF and a part's head. Where the data begins (or the buffer's end
    /// once closed); nil when the head is not all there yet.
    private mutating func head(_ buffer: UnsafeRawBufferPointer, from start: Int, _ event: (Event) -> Void) -> Int? {
        guard buffer.count - start >= 2 else { return nil }
        if MultipartByteranges.starts(with: [0x2D, 0x2D], in: buffer, at: start) {
            state = partCount > 0 ? .closed : .malformed
            return buffer.count
        }
        var at = start
        while at < buffer.count, buffer[at] == 0x20 || buffer[at] == 0x09 { at += 1 }
        guard buffer.count - at >= 2 else { return nil }
        guard MultipartByteranges.starts(with: [0x0D, 0x0A], in: buffer, at: at), partCount < MultipartByteranges.maxParts else {
            state = .malformed
            return nil
        }
        at += 2
        // The head is there once its empty line is.
        let complete = MultipartByteranges.starts(with: [0x0D, 0x0A], in: buffer, at: at)
            || MultipartByteranges.find([0x0D, 0x0A, 0x0D, 0x0A], in: buffer, from: at, lineStart: false) != nil
        guard complete else { return nil }
        guard let (piece, contentType, dataStart) = MultipartByteranges.partHead(buffer, from: at),
              length == nil || length == piece.length else {
            state = .malformed
            return nil
        }
        length = piece.length
        partCount += 1
        event(.part(piece, contentType: contentType))
        state = .data(remaining: piece.count)
        return dataStart
    }

    /// Whether the bytes from `at` could still begin `expected`.
    private func isPrefix(of expected: [UInt8], _ buffer: UnsafeRawBufferPointer, at: Int) -> Bool {
        for offset in 0..<min(expected.count, buffer.count - at) where buffer[at + offset] != expected[offset] { return false }
        return true
    }
}
