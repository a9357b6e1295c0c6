import CChecksum
import CacheSemantics

/// What the disk tier keeps of a stored response: its `StoredHead` (the
/// head a hit sends, lifetime, directives, Vary, tags, as decided when it
/// arrived), when it was written, and the body.
public struct DiskRecord: Equatable, Sendable {
    public var head: StoredHead
    /// When the record was written (wall seconds), for pruning and disk_ttl.
    public var storedAt: Int64
    public var body: [UInt8]
    /// Set instead of `body` when the record's body was left in its file
    /// (large records are not read into memory).
    public var bodyFile: FileBody?
    /// Marked stale by a soft purge: served only after revalidation (or
    /// under the stale rules). Kept in the fixed header's flags, so marking
    /// a file is one 4-byte write.
    public var markedStale = false

    public var key: String { head.key }
    public var tags: [String] { head.tags }
    public var varyValues: [String?] { head.varyValues }

    public init(head: StoredHead, storedAt: Int64, body: [UInt8]) {
        self.head = head
        self.storedAt = storedAt
        self.body = body
    }

    /// nil for a response whose body lives in a file (it is on disk already).
    public init?(_ entry: CachedResponse, storedAt: Int64) {
        guard entry.bodyFile == nil else { return nil }
        self.init(keeping: entry, storedAt: storedAt)
    }

    /// `entry` as a record, its body in memory or (`bodyFile`) left in its file.
    init(keeping entry: CachedResponse, storedAt: Int64) {
        self.init(head: entry.storedHead, storedAt: storedAt, body: Array(entry.body))
        bodyFile = entry.bodyFile
        // No freshness (a soft purge, or none to begin with) stays so on disk.
        markedStale = entry.lifetime == 0
    }

    /// The stored response again, as the tier that wrote it had it.
    public var response: CachedResponse {
        var head = head
        if markedStale { head.lifetime = 0 }
        return body.withUnsafeBytes { CachedResponse.make(head: head, body: $0, bodyFile: bodyFile) }
    }
}

/// The on-disk file format, version 4 (little-endian), also the shared
/// tier's record in Redis:
///
///     0  "LRDR"            magic
///     4  u32 version       4 (files of other versions are dropped: 1 and 2
///                          kept raw fields for the proxy to rebuild, 3 had
///                          a weaker 64-bit FNV-style sum in the same place)
///     8  u32 metaLength
///    12  u32 flags         bit 0: marked stale by a soft purge
///    16  u64 bodyLength
///    24  u64 checksum      CRC-32C over meta and body (not the flags)
///    32  meta              key, status, timing, storedAt, lifetime, validator,
///                          directives, head prefix, other fields, vary, tags
///        body
///
/// A file whose magic, version, lengths or checksum do not match is not a
/// record: the reader treats it as a miss and the tier deletes it.
public enum DiskFormat {
    public static let version: UInt32 = 4
    public static let fixedHeaderBytes = 32
    /// Where the flags word sits, and its bits.
    public static let flagsOffset = 12
    public static let staleFlag: UInt32 = 1
    static let magic: [UInt8] = Array("LRDR".utf8)
    /// Bounds on what a reader accepts, so a corrupt length cannot make it allocate wildly.
    static let maxMetaBytes = 16 << 20

    public enum Failure: Error, Equatable {
        case truncated, badMagic, unsupportedVersion(UInt32), badLength, checksumMismatch, malformedMeta
    }

    /// The whole file's bytes for `record`.
    public static func encode(_ record: DiskRecord) -> [UInt8] {
        let meta = encodeMeta(record)
        var sum = Checksum()
        sum.add(meta)
        sum.add(record.body)
        var out = fixedHeader(metaLength: meta.count, bodyLength: record.body.count, checksum: sum.value,
                              flags: record.markedStale ? staleFlag : 0)
        out.reserveCapacity(fixedHeaderBytes + meta.count + record.body.count)
        out.append(contentsOf: meta)
        out.append(contentsOf: record.body)
        return out
    }

    /// The 32-byte fixed header.
    public static func fixedHeader(metaLength: Int, bodyLength: Int, checksum: UInt64, flags: UInt32 = 0) -> [UInt8] {
        var out = Writer()
        out.bytes.append(contentsOf: magic)
        out.u32(version)
        out.u32(UInt32(metaLength))
        out.u32(flags)
        out.u64(UInt64(bodyLength))
        out.u64(checksum)
        return out.bytes
    }

    /// The meta byte's coding bits (bit 2: known).
    static func codingBits(_ coding: StoredCoding) -> UInt8 {
        switch coding {
        case .none: return 4
        case .gzip: return 4 | 2
        case .zstd: return 4 | 8
        case .br: return 4 | 16
        }
    }

    static func coding(bits facts: UInt8) -> StoredCoding? {
        guard facts & 4 != 0 else { return nil }
        return facts & 2 != 0 ? .gzip : facts & 8 != 0 ? .zstd : facts & 16 != 0 ? .br : StoredCoding.none
    }

    /// The metadata section for `record` (its body is not included).
    public static func encodeMeta(_ record: DiskRecord) -> [UInt8] {
        let head = record.head
        var meta = Writer()
        meta.bytes.reserveCapacity(head.headPrefix.count + head.key.utf8.count + 160)
        meta.string(head.key)
        meta.u32(UInt32(head.status))
        meta.i64(head.timing.requestTime)
        meta.i64(head.timing.responseTime)
        meta.i64(head.timing.dateValue ?? Int64.min)
        meta.i64(Int64(head.timing.ageValue))
        meta.i64(record.storedAt)
        meta.i64(Int64(head.lifetime))
        // Bit 0: has a validator; bit 2: the coding is known, bit 1: gzip,
        // bit 3: zstd, bit 4: br (files before zstd and br: bit 1 alone).
        meta.u8((head.hasValidator ? 1 : 0) | (head.coding.map(Self.codingBits) ?? 0))
        let words = head.directives.words
        meta.u32(UInt32(words.flags))
        for value in words.values { meta.u32(value) }
        meta.u32(UInt32(head.headPrefix.count))
        meta.bytes.append(contentsOf: head.headPrefix)
        meta.u32(UInt32(head.otherFields.count))
        for field in head.otherFields {
            meta.string(field.name)
            meta.string(field.value)
        }
        meta.u32(UInt32(head.varyNames.count))
        for name in head.varyNames { meta.string(name) }
        meta.u32(UInt32(head.varyValues.count))
        for value in head.varyValues {
            meta.u8(value == nil ? 0 : 1)
            meta.string(value ?? "")
        }
        meta.u32(UInt32(head.tags.count))
        for tag in head.tags { meta.string(tag) }
        return meta.bytes
    }

    public struct FixedHeader: Equatable, Sendable {
        public var metaLength: Int
        public var bodyLength: Int
        public var checksum: UInt64
        public var version: UInt32
        public var flags: UInt32
    }

    struct Writer {
        var bytes: [UInt8] = []
        mutating func u8(_ v: UInt8) { bytes.append(v) }
        mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
        mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
        mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }
        mutating func string(_ s: String) {
            u32(UInt32(s.utf8.count))
            bytes.append(contentsOf: s.utf8)
        }
    }
}

/// A record's checksum: CRC-32C (the CPU's crc32 instruction where it has
/// one), which catches every burst of up to 32 flipped bits and any odd
/// number of them; not a defence against deliberate tampering. Adding
/// bytes in pieces gives the same value as adding them at once, so a body
/// streamed to disk in chunks is summed as the reader sums the whole file.
public struct Checksum: Sendable {
    private var crc: UInt32 = 0

    public init() {}

    /// The sum of everything added so far (the header's u64 holds it).
    public var value: UInt64 { UInt64(crc) }

    public mutating func add<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        let done: Bool? = bytes.withContiguousStorageIfAvailable { buffer -> Bool in
            add(UnsafeRawBufferPointer(buffer))
            return true
        }
        if done == nil { Array(bytes).withUnsafeBytes { add($0) } }
    }

    public mutating func add(_ raw: UnsafeRawBufferPointer) {
        guard let base = raw.baseAddress, raw.count > 0 else { return }
        crc = larder_crc32c(crc, base, raw.count)
    }
}
