import Synchronization

/// `rate_limit = { requests = N, per = "1s", burst = M, key = ... }`: N
/// requests per period on average, and M more at once (nginx's
/// `limit_req ... burst=M nodelay`), for each client address or each
/// value of a request field.
public struct RateLimit: Hashable, Sendable {
    public enum Key: Hashable, Sendable {
        case address
        /// A request field's value (lowercased name); a request without it counts by its address.
        case header(String)
    }

    /// Microseconds between two requests at the steady rate.
    public let interval: UInt64
    /// How far ahead of the steady rate a client may be (burst requests).
    public let tolerance: UInt64
    public let key: Key
    public let requests: Int, periodMilliseconds: Int, burst: Int

    public init(requests: Int, periodMilliseconds: Int, burst: Int, key: Key = .address) {
        (self.requests, self.periodMilliseconds, self.burst, self.key) = (requests, periodMilliseconds, burst, key)
        interval = max(1, UInt64(periodMilliseconds) * 1000 / UInt64(max(1, requests)))
        tolerance = interval * UInt64(burst)
    }
}

/// The generic cell rate algorithm: a token bucket kept as one time, the
/// theoretical arrival time (TAT) of the client's next request at the
/// steady rate. Pure: the limiter stores what it returns.
public enum CellRate {
    public enum Decision: Equatable {
        case admit(newTAT: UInt64)
        /// Refused: microseconds until a request would be admitted.
        case refuse(retryAfter: UInt64)
    }

    public static func decide(tat: UInt64, now: UInt64, interval: UInt64, tolerance: UInt64) -> Decision {
        let start = max(tat, now)
        if start - now > tolerance { return .refuse(retryAfter: start - now - tolerance) }
        return .admit(newTAT: start + interval)
    }

    /// Retry-After's seconds for a wait (at least 1: 0 would say "now").
    public static func retryAfterSeconds(_ microseconds: UInt64) -> Int { Int(max(1, (microseconds + 999_999) / 1_000_000)) }
}

/// The clients one `rate_limit` tracks, shared by every worker: a fixed
/// table of 64-bit words, eight to a cache line; each word is a client's
/// 16-bit tag and its TAT in microseconds (48 bits: nine years of uptime).
/// A request costs one compare-and-swap, no lock; a new client takes its
/// line's empty or least recently seen word (the smallest TAT). Two clients
/// with the same line and tag share a bucket (one in 65,536 of a line's).
public final class RateLimiter: @unchecked Sendable {
    public let limit: RateLimit
    public static let defaultSlots = 1 << 16
    private let words: UnsafeMutablePointer<Atomic<UInt64>>
    private let lineMask: Int
    public let slots: Int
    private static let ways = 8
    private static let timeMask: UInt64 = (1 << 48) - 1

    /// The request field counted by (nil: the address).
    public let keyField: String?

    public init(_ limit: RateLimit, slots: Int = RateLimiter.defaultSlots) {
        self.limit = limit
        if case .header(let name) = limit.key { keyField = name } else { keyField = nil }
        let count = max(Self.ways, slots) / Self.ways * Self.ways
        precondition(count / Self.ways & (count / Self.ways - 1) == 0, "a power of two lines")
        self.slots = count
        lineMask = count / Self.ways - 1
        let raw = UnsafeMutableRawPointer.allocate(byteCount: count * 8, alignment: 64)
        words = raw.bindMemory(to: Atomic<UInt64>.self, capacity: count)
        for i in 0..<count { (words + i).initialize(to: Atomic(0)) }
    }

    deinit {
        words.deinitialize(count: slots)
        UnsafeMutableRawPointer(words).deallocate()
    }

    /// Admits one request of the client `hash` at `now` (microseconds, a
    /// monotonic clock), or says how long it must wait.
    public func take(_ hash: UInt64, now: UInt64) -> CellRate.Decision {
        let now = now & Self.timeMask
        let tag = (hash >> 48) | 1 << 15  // never 0: 0 is an empty word
        let line = words + (Int(truncatingIfNeeded: hash) & lineMask) * Self.ways
        for _ in 0..<4 {
            var victim = 0, victimTAT = UInt64.max, found = -1
            var current: UInt64 = 0
            for way in 0..<Self.ways {
                let word = line[way].load(ordering: .relaxed)
                if word >> 48 == tag { (found, current) = (way, word); break }
                let tat = word & Self.timeMask
                if tat < victimTAT { (victim, victimTAT, current) = (way, tat, word) }
            }
            let way = found >= 0 ? found : victim
            let tat = found >= 0 ? current & Self.timeMask : 0
            let decision = CellRate.decide(tat: tat, now: now, interval: limit.interval, tolerance: limit.tolerance)
            guard case .admit(let newTAT) = decision else { return decision }
            let (exchanged, _) = line[way].compareExchange(expected: current, desired: tag << 48 | (newTAT & Self.timeMask),
                                                            ordering: .relaxed)
            if exchanged { return decision }
        }
        // Contended four times over (many workers, one client): admitted,
        // as a limit must not turn a busy client into an error.
        return .admit(newTAT: now)
    }

    /// A client's hash: an address's 128 bits mixed (splitmix64's finalizer).
    public static func hash(_ address: IPAddress) -> UInt64 { mix(address.high ^ mix(address.low)) }

    /// A field value's hash (FNV-1a, then mixed; the same in every worker).
    public static func hash(_ value: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in value.utf8 { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return mix(h)
    }

    static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
