import CacheSemantics
import HTTPHeaders
#if canImport(Glibc)
import Glibc
#endif

/// Reading the on-disk format: one parser over raw bytes, read in place.
/// The index rebuild makes a `DiskRecord` of what it finds; the first hit
/// on a file builds its `CachedResponse` straight from the file's bytes
/// (the head prefix copied once into the entry, the body left in the file
/// when it is kept open; no key string, head array or record built in
/// between), and later hits are served from that.
extension DiskFormat {
    /// The fixed header: meta and body lengths, after checking magic and version.
    public static func header(_ bytes: ArraySlice<UInt8>) throws(Failure) -> FixedHeader {
        try bytes.withUnsafeBytes { raw in Result { () throws(Failure) in try header(raw) } }.get()
    }

    static func header(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> FixedHeader {
        guard bytes.count >= fixedHeaderBytes else { throw .truncated }
        var r = Reader(bytes)
        guard try r.u32() == magicWord else { throw .badMagic }
        let v = try r.u32()
        guard v == version else { throw .unsupportedVersion(v) }
        let metaLength = Int(try r.u32())
        let flags = try r.u32()
        let bodyLength = try r.u64()
        let checksum = try r.u64()
        guard metaLength <= maxMetaBytes, bodyLength < UInt64(Int.max / 2) else { throw .badLength }
        return FixedHeader(metaLength: metaLength, bodyLength: Int(bodyLength), checksum: checksum, version: v, flags: flags)
    }

    /// "LRDR" as the little-endian word the reader loads.
    private static let magicWord = UInt32(0x52) << 24 | UInt32(0x44) << 16 | UInt32(0x52) << 8 | UInt32(0x4C)

    /// Decodes a whole file, verifying the checksum.
    public static func decode(_ bytes: [UInt8]) throws(Failure) -> DiskRecord {
        try bytes.withUnsafeBytes { raw in
            Result { () throws(Failure) -> DiskRecord in
                let (h, metaEnd) = try checkedHeader(raw, verify: true)
                var record = try parseMeta(UnsafeRawBufferPointer(rebasing: raw[fixedHeaderBytes..<metaEnd])).record(flags: h.flags)
                record.body = Array(UnsafeRawBufferPointer(rebasing: raw[metaEnd...]))
                return record
            }
        }.get()
    }

    /// A disk hit: the whole file of `key` straight to its stored response.
    /// nil when the file holds another key (a hash collision). `verify:
    /// false` skips the checksum (a file verified once already).
    static func decodeEntry(_ bytes: [UInt8], key: String, verify: Bool,
                            shiftSeconds: Int64 = 0) throws(Failure) -> (storedAt: Int64, entry: CachedResponse)? {
        try bytes.withUnsafeBytes { raw in
            Result { () throws(Failure) in try decodeEntry(raw, key: key, verify: verify, shiftSeconds: shiftSeconds) }
        }.get()
    }

    /// The same from bytes read into a buffer of the caller's. `bodyIn`:
    /// the file the bytes were read from, open: the entry then leaves the
    /// body there (`FileBody`) to be kept and served as stored; except a
    /// stored piece of a range, whose body joins others in memory.
    static func decodeEntry(_ raw: UnsafeRawBufferPointer, key: String, verify: Bool, bodyIn file: StoredFile? = nil,
                            shiftSeconds: Int64 = 0) throws(Failure) -> (storedAt: Int64, entry: CachedResponse)? {
        let (h, metaEnd) = try checkedHeader(raw, verify: verify)
        let m = try parseMeta(UnsafeRawBufferPointer(rebasing: raw[fixedHeaderBytes..<metaEnd]))
        guard m.isKey(key) else { return nil }
        var timing = m.timing
        if shiftSeconds != 0 {
            timing.requestTime = timing.requestTime.plusSaturating(shiftSeconds)
            timing.responseTime = timing.responseTime.plusSaturating(shiftSeconds)
        }
        var body = UnsafeRawBufferPointer(rebasing: raw[metaEnd...])
        let length = body.count
        var bodyFile: FileBody?
        if let file, m.status != 206 {
            bodyFile = FileBody(file: file, offset: metaEnd, length: length)
            body = UnsafeRawBufferPointer(start: nil, count: 0)
        }
        let entry = CachedResponse.make(key: key, status: m.status, headPrefix: m.prefix,
                                        contentLength: m.status != 204 && m.status != 304 ? length : nil,
                                        body: body, bodyFile: bodyFile, otherFields: m.otherFields,
                                        timing: timing, lifetime: h.flags & staleFlag != 0 ? 0 : m.lifetime,
                                        directives: m.directives, varyNames: m.varyNames, varyValues: m.varyValues,
                                        tags: m.tags, hasValidator: m.hasValidator, coding: m.coding)
        return (m.storedAt.plusSaturating(shiftSeconds), entry)
    }

    /// The fixed header of a whole file whose length it must match, the
    /// checksum checked when asked; and where the metadata ends.
    private static func checkedHeader(_ bytes: UnsafeRawBufferPointer, verify: Bool) throws(Failure) -> (FixedHeader, Int) {
        let h = try header(bytes)
        guard bytes.count == fixedHeaderBytes + h.metaLength + h.bodyLength else { throw .truncated }
        if verify {
            var sum = Checksum()
            sum.add(UnsafeRawBufferPointer(rebasing: bytes[fixedHeaderBytes...]))
            guard sum.value == h.checksum else { throw .checksumMismatch }
        }
        return (h, fixedHeaderBytes + h.metaLength)
    }

    /// Decodes only the metadata (no body, no checksum): for rebuilding the
    /// index. `header` gives the flags (default: none).
    public static func decodeMeta(_ meta: ArraySlice<UInt8>, header: FixedHeader? = nil) throws(Failure) -> DiskRecord {
        try meta.withUnsafeBytes { raw in
            Result { () throws(Failure) in try parseMeta(raw).record(flags: header?.flags ?? 0) }
        }.get()
    }

    /// The metadata section read in place: `key` and `prefix` point into the
    /// bytes it was parsed from and are valid only while those are.
    struct Meta {
        var key: UnsafeRawBufferPointer
        var status: Int
        var timing: ResponseTiming
        var storedAt: Int64
        var lifetime: Int
        var hasValidator: Bool
        var coding: StoredCoding?
        var directives: PackedCacheControl
        var prefix: UnsafeRawBufferPointer
        var otherFields: HeaderFields
        var varyNames: [String]
        var varyValues: [String?]
        var tags: [String]

        func isKey(_ wanted: String) -> Bool {
            var wanted = wanted
            return wanted.withUTF8 { utf8 in
                utf8.count == key.count && (utf8.isEmpty || memcmp(utf8.baseAddress!, key.baseAddress!, key.count) == 0)
            }
        }

        /// A record of its own (the key and prefix copied out).
        func record(flags: UInt32) -> DiskRecord {
            let head = StoredHead(key: String(decoding: key, as: UTF8.self), status: status, headPrefix: Array(prefix),
                                  otherFields: otherFields, timing: timing, lifetime: lifetime, directives: directives,
                                  hasValidator: hasValidator, varyNames: varyNames, varyValues: varyValues, tags: tags,
                                  coding: coding)
            var record = DiskRecord(head: head, storedAt: storedAt, body: [])
            record.markedStale = flags & staleFlag != 0
            return record
        }
    }

    /// Parses and checks the metadata section (see `encodeMeta` for the order).
    static func parseMeta(_ meta: UnsafeRawBufferPointer) throws(Failure) -> Meta {
        var r = Reader(meta)
        let key = try r.take(Int(try r.u32()))
        let status = Int(try r.u32())
        let requestTime = try r.i64(), responseTime = try r.i64(), date = try r.i64(), age = try r.i64()
        let storedAt = try r.i64()
        let lifetime = try r.i64()
        let facts = try r.u8()
        let hasValidator = facts & 1 != 0, coding = DiskFormat.coding(bits: facts)
        let flags = try r.u32()
        let values = (try r.u32(), try r.u32(), try r.u32(), try r.u32(), try r.u32(), try r.u32())
        let prefix = try r.take(Int(try r.u32()))
        var otherFields = HeaderFields()
        for _ in 0..<(try r.count()) { otherFields.append(try r.string(), try r.string()) }
        var varyNames: [String] = []
        for _ in 0..<(try r.count()) { varyNames.append(try r.string()) }
        var varyValues: [String?] = []
        for _ in 0..<(try r.count()) {
            let present = try r.u8()
            let value = try r.string()
            varyValues.append(present == 0 ? nil : value)
        }
        var tags: [String] = []
        for _ in 0..<(try r.count()) { tags.append(try r.string()) }
        guard r.atEnd, varyNames.count == varyValues.count, (100...999).contains(status), flags <= UInt32(UInt16.max),
              (0...Int64(UInt32.max)).contains(lifetime), isStatusLineStart(prefix),
              plausibleTimes(requestTime, responseTime, storedAt), date == Int64.min || plausibleTimes(date),
              (0...maxDeltaSeconds).contains(age)
        else { throw .malformedMeta }
        let timing = ResponseTiming(requestTime: requestTime, responseTime: responseTime,
                                    dateValue: date == Int64.min ? nil : date, ageValue: Int(clamping: age))
        return Meta(key: key, status: status, timing: timing, storedAt: storedAt, lifetime: Int(lifetime), hasValidator: hasValidator,
                    coding: coding, directives: PackedCacheControl(flags: UInt16(flags), values: values), prefix: prefix,
                    otherFields: otherFields, varyNames: varyNames, varyValues: varyValues, tags: tags)
    }

    /// The largest Age a record holds: 2^31, what RFC 9111 section 1.2.2
    /// makes of a larger delta-seconds (an upstream's `Age` is stored so).
    static let maxDeltaSeconds: Int64 = 2_147_483_648

    /// Times a record may hold: seconds within years -9999...9999, so that
    /// no sum or difference of them and a clock can overflow (a record from
    /// Redis or a changed file is not trusted; one near Int64.min trapped
    /// in the freshness arithmetic).
    static let maxTimeMagnitude: Int64 = 253_402_300_799

    @inline(__always)
    static func plausibleTimes(_ time: Int64) -> Bool { (-maxTimeMagnitude...maxTimeMagnitude).contains(time) }

    /// (Not variadic: a variadic call built an array on every disk hit.)
    @inline(__always)
    static func plausibleTimes(_ a: Int64, _ b: Int64, _ c: Int64) -> Bool {
        plausibleTimes(a) && plausibleTimes(b) && plausibleTimes(c)
    }

    /// A head prefix must start "HTTP/1." and end with CRLF.
    private static func isStatusLineStart(_ prefix: UnsafeRawBufferPointer) -> Bool {
        guard prefix.count >= 12, prefix[prefix.count - 2] == 0x0D, prefix[prefix.count - 1] == 0x0A else { return false }
        // "HTTP/1." as two little-endian words (bytes 0-3 and 3-6).
        return prefix.loadUnaligned(as: UInt32.self) == 0x5054_5448 && prefix.loadUnaligned(fromByteOffset: 3, as: UInt32.self) == 0x2E31_2F50
    }

    /// Little-endian fields read in place, bounds checked.
    struct Reader {
        let bytes: UnsafeRawBufferPointer
        var i = 0
        init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }
        var atEnd: Bool { i == bytes.count }
        mutating func take(_ n: Int) throws(Failure) -> UnsafeRawBufferPointer {
            guard n >= 0, bytes.count - i >= n else { throw .truncated }
            defer { i += n }
            return UnsafeRawBufferPointer(rebasing: bytes[i..<(i + n)])
        }
        mutating func u8() throws(Failure) -> UInt8 { try take(1)[0] }
        @inline(__always) mutating func u32() throws(Failure) -> UInt32 { UInt32(littleEndian: try load(UInt32.self)) }
        @inline(__always) mutating func u64() throws(Failure) -> UInt64 { UInt64(littleEndian: try load(UInt64.self)) }
        @inline(__always) mutating func i64() throws(Failure) -> Int64 { Int64(bitPattern: try u64()) }
        @inline(__always) private mutating func load<T: FixedWidthInteger>(_: T.Type) throws(Failure) -> T {
            let n = MemoryLayout<T>.size
            guard bytes.count - i >= n else { throw .truncated }
            defer { i += n }
            return bytes.loadUnaligned(fromByteOffset: i, as: T.self)
        }
        mutating func count() throws(Failure) -> Int {
            let n = Int(try u32())
            guard n <= 100_000 else { throw .malformedMeta }
            return n
        }
        mutating func string() throws(Failure) -> String { String(decoding: try take(Int(try u32())), as: UTF8.self) }
    }
}
