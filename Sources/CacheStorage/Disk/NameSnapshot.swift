import CChecksum

/// The stored names of one cache sub-directory as they were when it was
/// last changed, kept in `DIR/names/XX` so that a lookup after a restart
/// (before the index rebuild has read that sub-directory) reads one small
/// file instead of listing the directory: on ext4 a listing of a few
/// hundred entries costs about 0.3 ms, of a few thousand several, and the
/// first hit of a restart waited for it (nginx opens its file by the key's
/// hash and lists nothing).
///
/// A snapshot describes its directory only while the directory's inode and
/// modification time are those it recorded: any name added, removed or
/// renamed there since changes the time, and the directory is listed again.
/// Only a directory last changed well before the listing is recorded
/// (`isSettled`): a change within the same tick of the file system's clock
/// would otherwise leave the time as recorded (git's "racily clean" index).
struct NameSnapshot: Equatable {
    /// The directory's identity and last change (`stat`).
    struct Stamp: Equatable {
        var inode: UInt64
        var seconds: Int64
        var nanoseconds: Int64

        /// The last change in wall nanoseconds.
        var changed: Int64 { seconds &* 1_000_000_000 &+ nanoseconds }
    }

    var stamp: Stamp
    var names: [FileName]

    static let magic: [UInt8] = Array("LRDN".utf8)
    static let version: UInt32 = 1
    static let headerBytes = 40
    /// Bounded as a listing is not: a decoded count past it is corrupt.
    static let maxNames = 1 << 20

    /// How long before the listing the directory must have been changed
    /// last: file-system timestamps advance by the kernel's tick (at most
    /// 10 ms), or by whole seconds on a file system that keeps no finer
    /// times (ext3, ext4 with small inodes: their times end in .000000000).
    static let settleNanoseconds: Int64 = 100_000_000
    static let coarseSettleNanoseconds: Int64 = 2_100_000_000

    /// How long after `changed` (wall nanoseconds) a directory last changed
    /// then may be recorded.
    static func settling(changed: Int64) -> Int64 {
        changed % 1_000_000_000 == 0 ? coarseSettleNanoseconds : settleNanoseconds
    }

    /// Whether a directory last changed at `changed` may be recorded by a
    /// listing made at `now`.
    static func isSettled(changed: Int64, now: Int64) -> Bool {
        changed <= now &- settling(changed: changed)
    }

    func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.headerBytes + names.count * 16 + 4)
        bytes += Self.magic
        Self.put(UInt64(Self.version) | UInt64(UInt32(names.count)) << 32, into: &bytes)
        Self.put(stamp.inode, into: &bytes)
        Self.put(UInt64(bitPattern: stamp.seconds), into: &bytes)
        Self.put(UInt64(bitPattern: stamp.nanoseconds), into: &bytes)
        bytes += [0, 0, 0, 0]
        for name in names {
            Self.put(name.key, into: &bytes)
            Self.put(name.variant, into: &bytes)
        }
        let crc = bytes.withUnsafeBytes { larder_crc32c(0, $0.baseAddress, $0.count) }
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: crc >> UInt32(shift))) }
        return bytes
    }

    /// Nil for anything this version did not write whole: another magic or
    /// version, a wrong length or checksum.
    init?(decoding bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= Self.headerBytes + 4, bytes.starts(with: Self.magic) else { return nil }
        let word = Self.word(bytes, at: 4)
        let count = Int(word >> 32)
        guard UInt32(truncatingIfNeeded: word) == Self.version, count <= Self.maxNames,
              bytes.count == Self.headerBytes + count * 16 + 4 else { return nil }
        let body = UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count - 4)])
        let crc = larder_crc32c(0, body.baseAddress, body.count)
        let stored = (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[body.count + $1]) << UInt32($1 * 8) }
        guard crc == stored else { return nil }
        stamp = Stamp(inode: Self.word(bytes, at: 12), seconds: Int64(bitPattern: Self.word(bytes, at: 20)),
                      nanoseconds: Int64(bitPattern: Self.word(bytes, at: 28)))
        names = (0..<count).map { i in
            FileName(key: Self.word(bytes, at: Self.headerBytes + i * 16), variant: Self.word(bytes, at: Self.headerBytes + i * 16 + 8))
        }
    }

    init(stamp: Stamp, names: [FileName]) {
        self.stamp = stamp
        self.names = names
    }

    private static func put(_ value: UInt64, into bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    private static func word(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt64 {
        UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }
}
