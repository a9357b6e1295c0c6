import CEventLoop
import CacheSemantics
import HTTP1
import HTTPHeaders

/// A stored response, immutable once built and shared between workers.
///
/// One allocation holds it all: the fields below, then (tail-allocated)
/// the key, the head prefix — status
/// line and stored header fields, serialized when the response was stored —
/// and the body. A hit writes the head
/// prefix, Age and Cache-Status and the blank line, then the body, in one
/// writev pointing into this block. The header fields are not kept a second
/// time as strings: `headers` reads them back from the head prefix (304s,
/// ranges, revalidation and disk writes need them; hits do not). This is
/// what keeps a small entry's overhead to a few hundred bytes.
///
/// A struct around the block's class reference: the standard library's
/// tail-allocating base class (`ManagedBuffer`) cannot itself be Sendable.
///
/// The block is reached without a reference count (`storage`); `owner` is
/// what keeps it alive: the block itself, or, for a worker's hit read from
/// the memory tier, the worker's period token (`Reclamation`), so that a
/// hit counts references only on an object of that worker's, never on the
/// block every worker reads. Whatever keeps a response beyond a request
/// (a tier, a worker's copies) takes an `owned()` one.
public struct CachedResponse: StoredResponseFacts, @unchecked Sendable {
    @usableFromInline final class Storage: ManagedBuffer<Parts, UInt8> {}

    @usableFromInline let owner: AnyObject
    @usableFromInline let block: Unmanaged<Storage>

    init(storage: Storage) {
        owner = storage
        block = .passUnretained(storage)
    }

    /// A block the memory tier's index holds, kept alive for its reader by
    /// `token` (see `Reclamation`).
    init(borrowing block: Unmanaged<Storage>, token: Unmanaged<PeriodToken>) {
        owner = token.takeUnretainedValue()
        self.block = block
    }

    /// The block, borrowed for `body`: nothing it holds is retained to be read.
    @inline(__always)
    func withStorage<T>(_ body: (Storage) -> T) -> T { block._withUnsafeGuaranteedRef(body) }

    /// The block, retained (tests, copies).
    var storage: Storage { block.takeUnretainedValue() }

    /// Whether the block itself keeps this response alive (not a period token).
    public var isOwned: Bool { Unmanaged.passUnretained(owner).toOpaque() == block.toOpaque() }

    /// The same response, holding its block itself.
    public func owned() -> CachedResponse { isOwned ? self : CachedResponse(storage: block.takeUnretainedValue()) }

    /// Whether both are the same stored object.
    public func isSame(_ other: CachedResponse) -> Bool { block.toOpaque() == other.block.toOpaque() }

    /// The fields, laid out small (104 bytes): what most entries lack sits
    /// behind the optional `rare` reference; the reason phrase is read back
    /// from the status line.
    @usableFromInline struct Parts {
        let timing: ResponseTiming
        /// Bytes of body in the block (0 when the body is in a file).
        let bodyCount: Int
        let lifetime: UInt32
        let correctedInitialAge: UInt32
        let headLength: UInt32
        /// The key's bytes start the block (a String would be
        /// a heap object of its own: 64 bytes for a typical URL).
        let keyLength: UInt32
        let status: UInt16
        let hasValidator: Bool
        /// The Content-Length field at the end of the head prefix that
        /// `make(head:)` wrote (0: none), so `storedHead` can leave it out.
        let lengthFieldBytes: UInt8
        /// Content-Encoding gzip, zstd or br (a client that does not take it gets the body decoded).
        let coding: StoredCoding
        /// Its Vary names any field (read on every hit: most do not, and
        /// an entry with `rare` fields need not be asked for them).
        let varies: Bool
        let directives: PackedCacheControl
        let rare: Rare?
    }

    final class Rare {
        let bodyFile: FileBody?
        let otherFields: HeaderFields
        let varyNames: [String]
        let varyValues: [String?]
        let tags: [String]
        /// What these cost beyond the block (`costBytes`), counted once.
        let costBytes: Int
        init(bodyFile: FileBody?, otherFields: HeaderFields, varyNames: [String], varyValues: [String?],
             tags: [String]) {
            self.bodyFile = bodyFile
            self.otherFields = otherFields
            self.varyNames = varyNames
            self.varyValues = varyValues
            self.tags = tags
            var cost = 96 + otherFields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 32 }
            cost += varyNames.reduce(0) { $0 + $1.utf8.count + 16 } + varyValues.reduce(0) { $0 + ($1?.utf8.count ?? 0) + 16 }
            cost += tags.reduce(0) { $0 + $1.utf8.count + 48 }
            // A small body in a file is read into memory to be stored there (`inMemory`).
            if let file = bodyFile, file.length <= DiskTier.inlineReadLimit { cost += file.length }
            costBytes = cost
        }
    }

    private static func clamped(_ value: Int) -> UInt32 { UInt32(min(max(value, 0), Int(UInt32.max))) }

    /// Builds a stored response. `headPrefix` is what a hit sends before
    /// Age (status line and fields); `otherFields` are stored fields not in
    /// it (those a hit must not send, such as targeted cache-control fields).
    /// `body` is copied in; a large response kept on disk only has an empty
    /// body and `bodyFile` instead (hits send it with sendfile).
    public static func make(key: String, status: Int, headPrefix: UnsafeRawBufferPointer,
                            body: UnsafeRawBufferPointer, bodyFile: FileBody? = nil,
                            otherFields: HeaderFields = [],
                            timing: ResponseTiming, lifetime: Int, cacheControl: CacheControl,
                            varyNames: [String], varyValues: [String?], tags: [String] = [],
                            hasValidator known: Bool? = nil) -> CachedResponse {
        make(key: key, status: status, headPrefix: headPrefix, contentLength: nil, body: body, bodyFile: bodyFile,
             otherFields: otherFields, timing: timing, lifetime: lifetime, directives: PackedCacheControl(cacheControl),
             varyNames: varyNames, varyValues: varyValues, tags: tags, hasValidator: known)
    }

    /// A stored response from what every tier keeps (`StoredHead`) and its
    /// body: in memory (copied in) or, with `bodyFile`, left in a file.
    public static func make(head: StoredHead, body: UnsafeRawBufferPointer, bodyFile: FileBody? = nil) -> CachedResponse {
        head.headPrefix.withUnsafeBytes { prefix in
            make(key: head.key, status: head.status, headPrefix: prefix,
                 contentLength: head.hasLengthField ? (bodyFile?.length ?? body.count) : nil, body: body, bodyFile: bodyFile,
                 otherFields: head.otherFields, timing: head.timing, lifetime: head.lifetime,
                 directives: head.directives, varyNames: head.varyNames, varyValues: head.varyValues, tags: head.tags,
                 hasValidator: head.hasValidator, coding: head.coding)
        }
    }

    /// The one that builds the block (`contentLength`: the Content-Length
    /// field to write after the prefix, nil for none).
    static func make(key: String, status: Int, headPrefix: UnsafeRawBufferPointer, contentLength: Int?,
                             body: UnsafeRawBufferPointer, bodyFile: FileBody?, otherFields: HeaderFields,
                             timing: ResponseTiming, lifetime: Int, directives: PackedCacheControl,
                             varyNames: [String], varyValues: [String?], tags: [String], hasValidator known: Bool?,
                             coding knownCoding: StoredCoding? = nil) -> CachedResponse {
        // Callers that have the fields at hand say; otherwise the head is scanned.
        let hasValidator = known ?? (HeadFields.contains("etag", or: "last-modified", in: headPrefix)
            || otherFields.contains { $0.name == "etag" || $0.name == "last-modified" })
        let plain = bodyFile == nil && otherFields.isEmpty && varyNames.isEmpty && tags.isEmpty
        var key = key
        // "Content-Length: N\r\n", written straight into the block (the
        // digits without a String: a disk hit builds an entry every time).
        let length = max(contentLength ?? 0, 0)
        var digitCount = 1
        while digitCount < 19, length >= Self.powersOfTen[digitCount] { digitCount += 1 }
        let lengthField = contentLength == nil ? 0 : lengthFieldName.count + digitCount + 2
        let headLength = headPrefix.count + lengthField
        let parts = Parts(timing: timing, bodyCount: body.count, lifetime: clamped(lifetime),
                          correctedInitialAge: clamped(Freshness.correctedInitialAge(timing)),
                          headLength: UInt32(headLength), keyLength: UInt32(key.utf8.count), status: UInt16(clamping: status),
                          hasValidator: hasValidator, lengthFieldBytes: UInt8(lengthField),
                          coding: knownCoding ?? StoredCoding.of(HeadFields.first("content-encoding", in: headPrefix)),
                          varies: !varyNames.isEmpty, directives: directives,
                          rare: plain ? nil : Rare(bodyFile: bodyFile, otherFields: otherFields, varyNames: varyNames,
                                                   varyValues: varyValues, tags: tags))
        let storage = unsafeDowncast(Storage.create(minimumCapacity: headLength + body.count + key.utf8.count) { _ in parts },
                                     to: Storage.self)
        storage.withUnsafeMutablePointerToElements { start in
            let tail = UnsafeMutableRawPointer(start)
            // The key first, beside the fields: a look-up compares it.
            key.withUTF8 { utf8 in
                if utf8.count > 0 { tail.copyMemory(from: utf8.baseAddress!, byteCount: utf8.count) }
            }
            let block = tail + key.utf8.count
            if headPrefix.count > 0 { block.copyMemory(from: headPrefix.baseAddress!, byteCount: headPrefix.count) }
            if lengthField > 0 {
                var at = block + headPrefix.count
                lengthFieldName.withUnsafeBytes { at.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                at += lengthFieldName.count
                var rest = length
                for i in stride(from: digitCount - 1, through: 0, by: -1) {
                    (at + i).storeBytes(of: UInt8(0x30 + rest % 10), as: UInt8.self)
                    rest /= 10
                }
                at += digitCount
                at.storeBytes(of: 0x0D, as: UInt8.self)
                (at + 1).storeBytes(of: 0x0A, as: UInt8.self)
            }
            if body.count > 0 { (block + headLength).copyMemory(from: body.baseAddress!, byteCount: body.count) }
        }
        return CachedResponse(storage: storage)
    }

    private static let lengthFieldName: [UInt8] = Array("Content-Length: ".utf8)
    private static let powersOfTen: [Int] = (0..<19).map { n in (0..<n).reduce(1) { acc, _ in acc * 10 } }

    /// What every tier keeps of this response (the head prefix without the
    /// Content-Length that `make(head:)` adds back).
    public var storedHead: StoredHead {
        let prefix = UnsafeRawBufferPointer(rebasing: headPrefix[..<(headLength - withStorage { Int($0.header.lengthFieldBytes) })])
        return StoredHead(key: key, status: status, headPrefix: Array(prefix),
                          otherFields: withStorage { $0.header.rare?.otherFields ?? [] },
                          timing: timing, lifetime: lifetime, directives: withStorage { $0.header.directives }, hasValidator: hasValidator,
                          varyNames: varyNames, varyValues: varyValues, tags: tags, coding: coding)
    }

    /// The same with the head prefix and body given as arrays (tests, small responses).
    public static func make(key: String, status: Int, headPrefix: [UInt8], body: [UInt8],
                            bodyFile: FileBody? = nil, otherFields: HeaderFields = [],
                            timing: ResponseTiming, lifetime: Int, cacheControl: CacheControl,
                            varyNames: [String], varyValues: [String?], tags: [String] = []) -> CachedResponse {
        headPrefix.withUnsafeBytes { head in
            body.withUnsafeBytes { body in
                make(key: key, status: status, headPrefix: head, body: body, bodyFile: bodyFile,
                     otherFields: otherFields, timing: timing, lifetime: lifetime, cacheControl: cacheControl,
                     varyNames: varyNames, varyValues: varyValues, tags: tags)
            }
        }
    }

    /// The cache key (built from the block's bytes on each use: not for hot paths).
    public var key: String { String(decoding: keyBytes, as: UTF8.self) }
    /// The cache key's UTF-8 bytes, in the block.
    public var keyBytes: UnsafeRawBufferPointer { withStorage { Self.keyBytes(of: $0) } }

    @inline(__always)
    static func keyBytes(of storage: Storage) -> UnsafeRawBufferPointer {
        storage.withUnsafeMutablePointerToElements { UnsafeRawBufferPointer(start: $0, count: Int(storage.header.keyLength)) }
    }
    public var status: Int { withStorage { Int($0.header.status) } }
    /// The reason phrase of the stored status line.
    public var reason: String? { HeadFields.reason(in: headPrefix) }
    public var timing: ResponseTiming { withStorage { $0.header.timing } }
    public var correctedInitialAge: Int { withStorage { Int($0.header.correctedInitialAge) } }
    /// Freshness lifetime in seconds.
    public var lifetime: Int { withStorage { Int($0.header.lifetime) } }
    public var cacheControl: CacheControl { withStorage { $0.header.directives.unpacked } }
    /// Vary field names (sorted) and the request's normalized values for them.
    public var varyNames: [String] { withStorage { $0.header.varies ? $0.header.rare?.varyNames ?? [] : [] } }
    /// Whether it names request fields it varies by (one flag read).
    public var varies: Bool { withStorage { $0.header.varies } }
    public var varyValues: [String?] { withStorage { $0.header.varies ? $0.header.rare?.varyValues ?? [] : [] } }
    /// Purge tags (sorted, no duplicates).
    public var tags: [String] { withStorage { $0.header.rare?.tags ?? [] } }
    /// For a large response kept on disk only: where its body is. The body
    /// in memory is then empty and hits are written with sendfile.
    public var bodyFile: FileBody? { withStorage { $0.header.rare?.bodyFile } }
    /// Whether the body is in a file (no copy of its `FileBody`).
    var hasBodyFile: Bool { withStorage { $0.header.rare?.bodyFile != nil } }
    /// Whether a conditional request can validate this response.
    public var hasValidator: Bool { withStorage { $0.header.hasValidator } }

    /// The tail block: the key, the head prefix, the body.
    var tail: UnsafeMutableRawPointer { withStorage { $0.withUnsafeMutablePointerToElements { UnsafeMutableRawPointer($0) } } }

    /// Start of the block: head prefix, then body (the key is before it). Stable while the entry lives.
    public var blockStart: UnsafeRawPointer { withStorage { UnsafeRawPointer(tail + Int($0.header.keyLength)) } }
    public var headLength: Int { withStorage { Int($0.header.headLength) } }
    public var headPrefix: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: blockStart, count: headLength) }
    /// The body held in memory (empty when it is in `bodyFile`).
    public var body: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: blockStart + headLength, count: withStorage { $0.header.bodyCount })
    }

    /// The same response with no freshness left (a soft purge): it is
    /// revalidated before reuse, or served stale where the stale rules allow.
    public func markedStale() -> CachedResponse {
        let lengthField = withStorage { Int($0.header.lengthFieldBytes) }
        return Self.make(key: key, status: status, headPrefix: UnsafeRawBufferPointer(rebasing: headPrefix[..<(headLength - lengthField)]),
                         contentLength: lengthField > 0 ? bodyLength : nil, body: body, bodyFile: bodyFile,
                         otherFields: withStorage { $0.header.rare?.otherFields ?? [] }, timing: timing, lifetime: 0,
                         directives: withStorage { $0.header.directives }, varyNames: varyNames, varyValues: varyValues, tags: tags,
                         hasValidator: hasValidator, coding: coding)
    }

    /// Bookkeeping bytes charged per entry beyond its head and body: the
    /// object's fields, its index slot and node, the key, allocator
    /// rounding (measured with bench/memory.sh).
    public static let overheadBytes = 384

    /// What this entry counts against the memory limit.
    public var costBytes: Int {
        withStorage { storage in
            var cost = headLength + storage.header.bodyCount + Int(storage.header.keyLength) + Self.overheadBytes
            if let rare = storage.header.rare { cost += rare.costBytes }
            return cost
        }
    }

    /// The body's length, wherever it is.
    public var bodyLength: Int { withStorage { $0.header.rare?.bodyFile?.length ?? $0.header.bodyCount } }

    public func currentAge(now: Int64) -> Int {
        Freshness.currentAge(correctedInitialAge: correctedInitialAge, responseTime: timing.responseTime, now: now)
    }

    /// Stored response fields (lowercased names), read back from the head
    /// prefix: every field but the Content-Length Larder wrote there, then
    /// the other stored fields.
    public var headers: HeaderFields {
        var fields = HeadFields.all(in: headPrefix).filter { $0.name != "content-length" }
        if let other = withStorage({ $0.header.rare?.otherFields }) { fields.append(contentsOf: other) }
        return fields
    }

    /// The first value of a stored field (lowercased name).
    public func header(_ name: String) -> String? {
        HeadFields.first(name, in: headPrefix) ?? withStorage { $0.header.rare?.otherFields.first { $0.name == name }?.value }
    }

    public var etag: String? { header("etag") }
    /// The bytes a stored 206 holds, from its Content-Range.
    public var storedPiece: PartialContent.Piece? {
        // A record whose body is not the length its Content-Range says
        // (from a damaged or forged file or Redis value) holds no piece: its
        // ranges would be read past its body.
        guard status == 206, let piece = PartialContent.piece(contentRange: header("content-range")), piece.count == bodyLength
        else { return nil }
        return piece
    }
    /// The coding Larder can decode its body from (Content-Encoding gzip, zstd or br alone), or none.
    public var coding: StoredCoding { withStorage { $0.header.coding } }
    public var lastModified: String? { header("last-modified") }
    public var contentLanguage: String? { header("content-language") }
    public var contentEncoding: String? { header("content-encoding") }
}

/// Reads header fields back from a serialized head ("Status line\r\n"
/// then "Name: value\r\n" lines, as `ResponseSerializer` writes them).
enum HeadFields {
    /// Calls `body` with each field's name and value bytes; stops when it returns false.
    static func forEach(in head: UnsafeRawBufferPointer,
                                _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Bool) {
        let bytes = head.bindMemory(to: UInt8.self)
        var i = 0
        // Skip the status line.
        while i + 1 < bytes.count, !(bytes[i] == 0x0D && bytes[i + 1] == 0x0A) { i += 1 }
        i += 2
        while i < bytes.count {
            var end = i
            while end + 1 < bytes.count, !(bytes[end] == 0x0D && bytes[end + 1] == 0x0A) { end += 1 }
            if end + 1 >= bytes.count { end = bytes.count }
            var colon = i
            while colon < end, bytes[colon] != 0x3A { colon += 1 }
            if colon < end {
                var valueStart = colon + 1
                while valueStart < end, bytes[valueStart] == 0x20 || bytes[valueStart] == 0x09 { valueStart += 1 }
                let name = UnsafeRawBufferPointer(rebasing: head[i..<colon])
                let value = UnsafeRawBufferPointer(rebasing: head[valueStart..<end])
                if !body(name, value) { return }
            }
            i = end + 2
        }
    }

    private static func lowercase(_ c: UInt8) -> UInt8 { c >= 0x41 && c <= 0x5A ? c | 0x20 : c }

    private static func equals(_ name: UnsafeRawBufferPointer, _ lowercased: String) -> Bool {
        guard name.count == lowercased.utf8.count else { return false }
        var utf8 = lowercased.utf8.makeIterator()
        for c in name {
            guard let l = utf8.next(), lowercase(c) == l else { return false }
        }
        return utf8.next() == nil
    }

    /// The reason phrase of the status line ("HTTP/1.1 200 OK": "OK").
    static func reason(in head: UnsafeRawBufferPointer) -> String? {
        let bytes = head.bindMemory(to: UInt8.self)
        var end = 0
        while end < bytes.count, bytes[end] != 0x0D { end += 1 }
        var spaces = 0, start = 0
        while start < end, spaces < 2 {
            if bytes[start] == 0x20 { spaces += 1 }
            start += 1
        }
        guard spaces == 2, start < end else { return nil }
        return FieldBytes.string(UnsafeRawBufferPointer(rebasing: head[start..<end]))
    }

    static func first(_ name: String, in head: UnsafeRawBufferPointer) -> String? {
        var found: String?
        forEach(in: head) { n, v in
            guard equals(n, name) else { return true }
            found = FieldBytes.string(v)
            return false
        }
        return found
    }

    /// Whether a field named `name` or `other` is present (one pass).
    static func contains(_ name: String, or other: String, in head: UnsafeRawBufferPointer) -> Bool {
        var found = false
        forEach(in: head) { n, _ in
            found = equals(n, name) || equals(n, other)
            return !found
        }
        return found
    }

    /// Appends each field line of `head` (status line left out) but those
    /// named `name`, as they are.
    static func appendLines(of head: UnsafeRawBufferPointer, except name: String, to out: inout [UInt8]) {
        forEach(in: head) { n, v in
            guard !equals(n, name) else { return true }
            // The line runs from its name to the end of its value.
            let start = n.baseAddress! - head.baseAddress!, end = v.baseAddress! - head.baseAddress! + v.count
            out.append(contentsOf: head[start..<end])
            out.append(contentsOf: [0x0D, 0x0A])
            return true
        }
    }

    static func all(in head: UnsafeRawBufferPointer) -> HeaderFields {
        var fields = HeaderFields()
        forEach(in: head) { n, v in
            fields.append(String(decoding: n.map(lowercase), as: UTF8.self), FieldBytes.string(v))
            return true
        }
        return fields
    }
}

/// A body stored in a file: `length` bytes at `offset` of an open file.
/// The descriptor leaves the store with the response (a hit never opens
/// the file by its path again) and stays open while anything holds it:
/// a client still being sent the body reads the version it began with,
/// even if the file is replaced or removed meanwhile.
public struct FileBody: Equatable, Sendable {
    public let file: StoredFile
    public var offset: Int
    public var length: Int
    public init(file: StoredFile, offset: Int, length: Int) {
        self.file = file
        self.offset = offset
        self.length = length
    }

    /// The file's path when it was opened (for messages).
    public var path: String { file.path }

    public static func == (a: FileBody, b: FileBody) -> Bool {
        a.file === b.file && a.offset == b.offset && a.length == b.length
    }
}
