/// A stored file's name, "<key hash>-<variant hash>.lrd" (16 lowercase hex
/// digits each), kept as its two numbers: 16 bytes in the index entry
/// instead of a 37-byte string on the heap (about 80 bytes per file with
/// the allocator's share, and a reference count every hit touched). The
/// string is made where a path is needed, the C string of a hit's `openat`
/// on the stack.
struct FileName: Hashable, Sendable, CustomStringConvertible {
    let key: UInt64
    let variant: UInt64

    static let byteCount = 37
    private static let suffix = Array(".lrd".utf8)

    init(key: UInt64, variant: UInt64) {
        self.key = key
        self.variant = variant
    }

    /// A name as Larder writes it; nil for anything else.
    init?(_ name: String) {
        var name = name
        guard let parsed = name.withUTF8({ Self.parse($0) }) else { return nil }
        self = parsed
    }

    private static func parse(_ utf8: UnsafeBufferPointer<UInt8>) -> FileName? {
        guard utf8.count == byteCount, utf8[16] == UInt8(ascii: "-"), utf8[33...].elementsEqual(suffix),
              let key = hex(utf8[0..<16]), let variant = hex(utf8[17..<33])
        else { return nil }
        return FileName(key: key, variant: variant)
    }

    private static func hex(_ digits: Slice<UnsafeBufferPointer<UInt8>>) -> UInt64? {
        var value: UInt64 = 0
        for c in digits {
            let digit: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }

    /// The fan-out sub-directory it lives in: the key hash's first byte.
    var subdirectory: Int { Self.subdirectory(ofKey: key) }

    /// The sub-directory of every file of the key whose hash is `key`.
    static func subdirectory(ofKey key: UInt64) -> Int { Int(key >> 56) }

    var description: String {
        String(unsafeUninitializedCapacity: Self.byteCount) { buffer in
            write(into: UnsafeMutableRawBufferPointer(buffer))
            return Self.byteCount
        }
    }

    /// The name as a NUL-terminated C string on the stack.
    func withCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Self.byteCount + 1) { buffer in
            write(into: UnsafeMutableRawBufferPointer(buffer))
            buffer[Self.byteCount] = 0
            return body(UnsafePointer(buffer.baseAddress!))
        }
    }

    private func write(into bytes: UnsafeMutableRawBufferPointer) {
        let digits: StaticString = "0123456789abcdef"
        func put(_ value: UInt64, at start: Int) {
            for i in 0..<16 {
                bytes[start + i] = digits.utf8Start[Int(value >> UInt64(60 - 4 * i) & 0xF)]
            }
        }
        put(key, at: 0)
        bytes[16] = UInt8(ascii: "-")
        put(variant, at: 17)
        for (i, c) in Self.suffix.enumerated() { bytes[33 + i] = c }
    }
}

/// The 64-bit hash file names are made of (FNV-1a style, eight bytes per
/// step): spread well enough that two keys of a million rarely share a
/// name (a shared name costs one of them its file). Not the records'
/// checksum, which must catch damage instead (`Checksum`, CRC-32C).
struct NameHash {
    private var h: UInt64 = 0xCBF2_9CE4_8422_2325
    private static let prime: UInt64 = 0x0000_0100_0000_01B3

    var value: UInt64 { h }

    mutating func add(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var i = 0, v = h
            while i + 8 <= raw.count {
                v = (v ^ UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self))) &* Self.prime
                i += 8
            }
            while i < raw.count {
                v = (v ^ UInt64(raw[i])) &* Self.prime
                i += 1
            }
            h = v
        }
    }
}
