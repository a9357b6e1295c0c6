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
        // Bit order as in `unpacked`.
        let bits = [cc.noStore, cc.noCache, cc.isPrivate, cc.mustUnderstand, cc.isPublic, cc.mustRevalidate,
                    cc.proxyRevalidate, cc.noTransform, cc.immutable, cc.onlyIfCached]
        for (bit, set) in bits.enumerated() where set { flags |= 1 << bit }
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
}
