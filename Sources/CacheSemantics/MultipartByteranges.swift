/// A multipart/byteranges body (RFC 9110 section 14.6): a 206 answering
/// several ranges sends each as a part with its own Content-Range (and
/// Content-Type), between boundary delimiters (RFC 2046 section 5.1.1).
/// Larder splits a stored one into its pieces (`PartialContent`).
public enum MultipartByteranges {
    public struct Part: Equatable, Sendable {
        /// The bytes of the representation the part holds.
        public var piece: PartialContent.Piece
        /// The part's Content-Type (the representation's), if it gave one.
        public var contentType: String?
        /// Where the part's bytes lie in the body.
        public var bytes: Range<Int>

        public init(piece: PartialContent.Piece, contentType: String?, bytes: Range<Int>) {
            self.piece = piece
            self.contentType = contentType
            self.bytes = bytes
        }
    }

    /// More parts than anyone asks for: a body with more is not split.
    public static let maxParts = 1000
    /// A part's header section larger than this is not well formed.
    static let maxPartHeaderBytes = 8192

    /// The boundary a Content-Type names when it is multipart/byteranges
    /// (`boundary=` token or quoted string, 1 to 70 characters); nil else.
    public static func boundary(contentType: String?) -> String? {
        guard let contentType else { return nil }
        var fields = contentType.split(separator: ";", omittingEmptySubsequences: false).makeIterator()
        guard let type = fields.next(), type.trimmingWhitespace().lowercased() == "multipart/byteranges" else { return nil }
        while let parameter = fields.next() {
            guard let equals = parameter.firstIndex(of: "="),
                  parameter[..<equals].trimmingWhitespace().lowercased() == "boundary" else { continue }
            var value = parameter[parameter.index(after: equals)...].trimmingWhitespace()
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            return (1...70).contains(value.utf8.count) && !value.contains("\"") ? value : nil
        }
        return nil
    }

    /// The parts of `body`, in the order they came; nil when it is not
    /// well formed: no delimiter, a part without a Content-Range of one
    /// range of a known complete length, parts of representations of
    /// different lengths, bytes that do not end where their Content-Range
    /// says (the next delimiter must follow at once), no closing delimiter.
    public static func parts(of body: UnsafeRawBufferPointer, boundary: String) -> [Part]? {
        var stream = MultipartStream(boundary: boundary)
        var parts: [Part] = []
        // Given whole, each part's data comes as one event, inside `body`.
        let read = stream.consume(body) { event in
            switch event {
            case .part(let piece, let contentType):
                parts.append(Part(piece: piece, contentType: contentType, bytes: 0..<0))
            case .data(let data):
                let start = body.baseAddress.map { data.baseAddress! - $0 } ?? 0
                parts[parts.count - 1].bytes = start..<(start + data.count)
            }
        }
        return read && stream.isComplete ? parts : nil
    }

    /// A part's header lines from `start` to the empty line: its piece
    /// (Content-Range), Content-Type, and where its data begins.
    static func partHead(_ body: UnsafeRawBufferPointer, from start: Int)
        -> (PartialContent.Piece, String?, Int)? {
        var at = start, contentRange: String?, contentType: String?
        while true {
            guard let end = find([0x0D, 0x0A], in: body, from: at, lineStart: false), end - start <= maxPartHeaderBytes
            else { return nil }
            if end == at { break }
            let line = String(decoding: UnsafeRawBufferPointer(rebasing: body[at..<end]), as: UTF8.self)
            if let colon = line.firstIndex(of: ":") {
                let value = line[line.index(after: colon)...].trimmingWhitespace()
                switch line[..<colon].lowercased() {
                case "content-range":
                    guard contentRange == nil else { return nil }
                    contentRange = value
                case "content-type": contentType = value
                default: break
                }
            }
            at = end + 2
        }
        guard let piece = PartialContent.piece(contentRange: contentRange) else { return nil }
        return (piece, contentType, at + 2)
    }

    static func starts(with prefix: [UInt8], in body: UnsafeRawBufferPointer, at index: Int) -> Bool {
        guard index >= 0, index + prefix.count <= body.count else { return false }
        for (offset, byte) in prefix.enumerated() where body[index + offset] != byte { return false }
        return true
    }

    /// Where `needle` next occurs from `index`; `lineStart`: only at the
    /// body's start or right after a CRLF.
    static func find(_ needle: [UInt8], in body: UnsafeRawBufferPointer, from index: Int, lineStart: Bool) -> Int? {
        var at = index
        while at + needle.count <= body.count {
            if starts(with: needle, in: body, at: at), !lineStart || at == 0 || (at >= 2 && body[at - 2] == 0x0D && body[at - 1] == 0x0A) {
                return at
            }
            at += 1
        }
        return nil
    }
}
