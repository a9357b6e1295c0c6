/// A stored response's body as whoever sends it sees it: pieces of bytes
/// (`slice`), wherever they are kept, in the entry's block (queued by
/// reference) or in a disk tier's file (read into the output, or sent with
/// sendfile, as the transport chooses). Nothing above the storage needs
/// to know which; `isInMemory` says whether reading it costs anything.
public struct StoredBody {
    private let entry: CachedResponse
    private let file: FileBody?

    init(_ entry: CachedResponse) {
        self.entry = entry
        file = entry.bodyFile
    }

    public var count: Int { file?.length ?? entry.bodyLength }

    /// Whether the bytes are in memory already: nothing to read, no file to open.
    public var isInMemory: Bool { file == nil }

    /// Whether every byte is still there (a file cut shorter behind
    /// Larder's back is not: the entry is dropped and fetched again).
    public var isReadable: Bool { file?.isReadable ?? true }

    /// The bytes `range` of the body.
    public func slice(_ range: Range<Int>) -> StoredBytes {
        if let file { return .file(file.file, (file.offset + range.lowerBound)..<(file.offset + range.upperBound)) }
        let start = entry.headLength
        return .block(entry, (start + range.lowerBound)..<(start + range.upperBound))
    }

    /// All of it.
    public var whole: StoredBytes { slice(0..<count) }

    public typealias ReadInto = FileBody.ReadInto

    /// Copies the whole body into `buffer` (`count` bytes): from memory,
    /// or from its file (`cachedOnly`: from the page cache alone, else
    /// `.wouldBlock`: a worker's loop does not wait for the disk).
    public func read(into buffer: UnsafeMutableRawBufferPointer, cachedOnly: Bool) -> ReadInto {
        guard let file else {
            if count > 0 { buffer.baseAddress!.copyMemory(from: entry.body.baseAddress!, byteCount: count) }
            return .read
        }
        return file.read(into: buffer, cachedOnly: cachedOnly)
    }

    /// Where the bytes are kept, for a log line.
    public var place: String { file.map { "\($0.path) (\($0.offset + $0.length) bytes)" } ?? "memory" }
}

/// Bytes of a stored response on their way to a client: a range of the
/// entry's block (its head or body), or of the file that holds its body.
/// Only the transport that writes them tells the two apart.
public enum StoredBytes {
    case block(CachedResponse, Range<Int>)
    case file(StoredFile, Range<Int>)

    public var count: Int {
        switch self {
        case .block(_, let range), .file(_, let range): return range.count
        }
    }
}

extension CachedResponse {
    /// The body, wherever it is kept.
    public var storedBody: StoredBody { StoredBody(self) }
    /// The same body, kept where it is, under another head (a 304's refresh).
    public func withHead(_ head: StoredHead) -> CachedResponse { CachedResponse.make(head: head, body: body, bodyFile: bodyFile) }
    /// The stored head's bytes, as a hit over HTTP/1.1 sends them.
    public var storedHeadBytes: StoredBytes { .block(self, 0..<headLength) }
}
