/// A stored response's body as whoever sends it sees it: pieces of bytes
/// (`slice`), wherever they are kept, in the entry's block (queued by
/// reference) or in a disk tier's file (read into the output, or sent with
/// sendfile, as the transport chooses). Nothing above the storage needs
/// to know which; `isInMemory` says whether reading it costs anything.
/// A view of the entry the caller holds, made where it is used and never
/// kept (it holds no reference of its own: every hit makes one); read once
/// from the entry. `slice` hands out references.
public struct StoredBody {
    @usableFromInline unowned(unsafe) let owner: AnyObject
    @usableFromInline let block: Unmanaged<CachedResponse.Storage>
    @usableFromInline let headLength: Int
    public let count: Int
    /// Whether the bytes are in memory already: nothing to read, no file to open.
    public let isInMemory: Bool

    init(_ entry: CachedResponse) {
        (owner, block) = (entry.owner, entry.block)
        // One read of the entry's header for the three (every hit makes
        // one); a memory hit copies no file reference.
        (isInMemory, headLength, count) = entry.withStorage { storage in
            if let rare = storage.header.rare, rare.bodyFile != nil {
                return (false, Int(storage.header.headLength), rare.bodyFile!.length)
            }
            return (true, Int(storage.header.headLength), storage.header.bodyCount)
        }
    }

    /// The entry, with a reference of its own.
    @inlinable var entry: CachedResponse { CachedResponse(owner: owner, block: block) }

    /// The body's file (read where it is needed: disk hits only).
    @usableFromInline var file: FileBody? { isInMemory ? nil : entry.bodyFile }

    /// Whether every byte is still there (a file cut shorter behind
    /// Larder's back is not: the entry is dropped and fetched again).
    public var isReadable: Bool { file?.isReadable ?? true }

    /// The bytes `range` of the body.
    @inlinable
    public func slice(_ range: Range<Int>) -> StoredBytes {
        if !isInMemory, let file { return .file(file.file, (file.offset + range.lowerBound)..<(file.offset + range.upperBound)) }
        return .block(entry, (headLength + range.lowerBound)..<(headLength + range.upperBound))
    }

    /// All of it.
    @inlinable public var whole: StoredBytes { slice(0..<count) }

    /// The stored head's bytes, as a hit over HTTP/1.1 sends them (in the block, before the body's).
    @inlinable public var head: StoredBytes { .block(entry, 0..<headLength) }

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

    @inlinable
    public var count: Int {
        switch self {
        case .block(_, let range), .file(_, let range): return range.count
        }
    }
}

extension CachedResponse {
    /// A copy of another response's references (`StoredBody` keeps them unretained).
    @usableFromInline init(owner: AnyObject, block: Unmanaged<Storage>) { (self.owner, self.block) = (owner, block) }
    /// The body, wherever it is kept.
    public var storedBody: StoredBody { StoredBody(self) }
    /// The same body, kept where it is, under another head (a 304's refresh).
    public func withHead(_ head: StoredHead) -> CachedResponse { CachedResponse.make(head: head, body: body, bodyFile: bodyFile) }
}

/// A stored body read piece by piece from any position (a stored gzip
/// body decoded for a client as it drains), wherever it is kept: a body in
/// memory is read in place (`inPlace`, no copy), a file's into the
/// caller's buffer, from the page cache alone where the caller must not
/// wait for the disk (`readCached`). A file stays open while this lives.
public final class StoredBodyReader {
    public typealias CachedRead = FileBodyReader.CachedRead
    public let count: Int
    /// Holds a block's bytes (its own reference, not a worker's period token).
    private let entry: CachedResponse
    private let file: FileBodyReader?

    /// Nil when the body's file is shorter than recorded.
    init?(_ entry: CachedResponse) {
        if let body = entry.bodyFile {
            guard let file = FileBodyReader(body) else { return nil }
            self.file = file
        } else {
            file = nil
        }
        self.entry = entry.owned()
        count = entry.bodyLength
    }

    /// The bytes from `position` to the end when the body is in memory
    /// (read in place); nil for a body in a file (read it into a buffer).
    public func inPlace(from position: Int) -> UnsafeRawBufferPointer? {
        guard file == nil else { return nil }
        return UnsafeRawBufferPointer(rebasing: entry.body[min(position, count)...])
    }

    /// Up to `buffer.count` bytes from `position`: how many (0 at the end); nil on a read error.
    public func read(from position: Int, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        guard let file else { return copy(from: position, into: buffer) }
        return file.read(from: position, into: buffer)
    }

    /// The same from the page cache only: `.wouldBlock` when the bytes are not there.
    public func readCached(from position: Int, into buffer: UnsafeMutableRawBufferPointer) -> CachedRead {
        guard let file else { return .read(copy(from: position, into: buffer)) }
        return file.readCached(from: position, into: buffer)
    }

    private func copy(from position: Int, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let n = max(0, min(buffer.count, count - position))
        if n > 0 { buffer.baseAddress!.copyMemory(from: entry.body.baseAddress! + position, byteCount: n) }
        return n
    }
}

extension StoredBody {
    /// A reader of the body (nil when its file is shorter than recorded).
    public func reader() -> StoredBodyReader? { StoredBodyReader(entry) }
}
