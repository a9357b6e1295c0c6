/// A stored response's Cache-Control directives in 28 bytes instead of the
/// 121 of `CacheControl`: a memory tier of a million small entries keeps one
/// per entry. Field-name lists (`no-cache="..."`, `private="..."`) are not
/// kept: the fields they name were left out of the stored response.
public struct PackedCacheControl: Equatable, Sendable {
    private var flags: UInt16 = 0
    private var maxAge = absent, sMaxAge = absent, maxStale = absent, minFresh = absent
    private var staleWhileRevalidate = absent, staleIfError = absent

    private static let absent = UInt32.max
    /// `max-stale` without a value (Int.max in `CacheControl`).
    private static let unbounded = UInt32.max - 1
    /// Parsed delta-seconds saturate at 2^31 (section 1.2.2); so do these.
    private static let saturated = 2_147_483_648

    private static func pack(_ value: Int?) -> UInt32 {
        guard let value else { return absent }
        if value == Int.max { return unbounded }
        return UInt32(min(max(value, 0), saturated))
    }

    private static func unpack(_ value: UInt32) -> Int? {
        switch value {
        case absent: return nil
        case unbounded: return Int.max
        default: return Int(value)
        }
    }

    public init(_ cc: CacheControl) {
        // Bit order as in `unpacked` (no array: this runs on every stored miss).
        func bit(_ set: Bool, _ n: UInt16) -> UInt16 { set ? 1 << n : 0 }
        flags = bit(cc.noStore, 0) | bit(cc.noCache, 1) | bit(cc.isPrivate, 2) | bit(cc.mustUnderstand, 3)
            | bit(cc.isPublic, 4) | bit(cc.mustRevalidate, 5) | bit(cc.proxyRevalidate, 6) | bit(cc.noTransform, 7)
            | bit(cc.immutable, 8) | bit(cc.onlyIfCached, 9)
        maxAge = Self.pack(cc.maxAge)
        sMaxAge = Self.pack(cc.sMaxAge)
        maxStale = Self.pack(cc.maxStale)
        minFresh = Self.pack(cc.minFresh)
        staleWhileRevalidate = Self.pack(cc.staleWhileRevalidate)
        staleIfError = Self.pack(cc.staleIfError)
    }

    /// The directives again (without field-name lists). Builds a struct on
    /// the stack; nothing is allocated.
    public var unpacked: CacheControl {
        var cc = CacheControl()
        cc.noStore = flags & 1 != 0
        cc.noCache = flags & 2 != 0
        cc.isPrivate = flags & 4 != 0
        cc.mustUnderstand = flags & 8 != 0
        cc.isPublic = flags & 16 != 0
        cc.mustRevalidate = flags & 32 != 0
        cc.proxyRevalidate = flags & 64 != 0
        cc.noTransform = flags & 128 != 0
        cc.immutable = flags & 256 != 0
        cc.onlyIfCached = flags & 512 != 0
        cc.maxAge = Self.unpack(maxAge)
        cc.sMaxAge = Self.unpack(sMaxAge)
        cc.maxStale = Self.unpack(maxStale)
        cc.minFresh = Self.unpack(minFresh)
        cc.staleWhileRevalidate = Self.unpack(staleWhileRevalidate)
        cc.staleIfError = Self.unpack(staleIfError)
        return cc
    }

    /// The packed words, for storing (the disk tier's records): the flags,
    /// then the six values (absent, unbounded and saturated as packed).
    public var words: (flags: UInt16, values: [UInt32]) {
        (flags, [maxAge, sMaxAge, maxStale, minFresh, staleWhileRevalidate, staleIfError])
    }

    /// Directives read back from `words`; nil when there are not six values.
    public init?(flags: UInt16, values: [UInt32]) {
        guard values.count == 6 else { return nil }
        self.init(flags: flags, values: (values[0], values[1], values[2], values[3], values[4], values[5]))
    }

    /// The same from the six values in order (no array: a disk hit reads them).
    public init(flags: UInt16, values: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)) {
        self.flags = flags
        (maxAge, sMaxAge, maxStale, minFresh, staleWhileRevalidate, staleIfError) = values
    }
}
