/// A client connection's deadlines as one value, on the loop's monotonic
/// milliseconds: waiting for a request (header_timeout, then
/// keep_alive_timeout), its body's progress (body_timeout), the client's
/// taking output (send_timeout), an HTTP/2 stream's client holding its
/// window shut (send_timeout per stream) and a lingering close. The connection
/// keeps one loop timer, armed for the earliest (`next`); moving a
/// deadline later costs no timer: the one armed fires early, and is armed
/// again for what is then due. Pure, so every order of events is tested
/// without a clock.
public struct ConnectionDeadlines: Equatable {
    @inlinable public init() {}

    public enum Kind: CaseIterable {
        /// No request (or only part of one) arrived in time.
        case idle
        /// The request body stopped arriving.
        case body
        /// The client stopped taking output.
        case send
        /// HTTP/2: a stream's client stopped opening its window.
        case window
        /// A lingering close is over.
        case linger
    }

    /// Each kind's deadline; 0: none.
    @usableFromInline var at: (idle: UInt64, body: UInt64, send: UInt64, window: UInt64, linger: UInt64) = (0, 0, 0, 0, 0)

    @inlinable
    public static func == (a: Self, b: Self) -> Bool { a.at == b.at }

    @inlinable
    public subscript(kind: Kind) -> UInt64? {
        get {
            let value: UInt64
            switch kind {
            case .idle: value = at.idle
            case .body: value = at.body
            case .send: value = at.send
            case .window: value = at.window
            case .linger: value = at.linger
            }
            return value == 0 ? nil : value
        }
        set {
            let value = newValue ?? 0
            switch kind {
            case .idle: at.idle = value
            case .body: at.body = value
            case .send: at.send = value
            case .window: at.window = value
            case .linger: at.linger = value
            }
        }
    }

    /// The earliest deadline set, if any: when the timer must fire.
    @inlinable
    public var next: UInt64? {
        // 0 (none) becomes the largest value: no array on the request path.
        let earliest = min(min(min(at.idle &- 1, at.body &- 1), min(at.send &- 1, at.linger &- 1)), at.window &- 1)
        return earliest == .max ? nil : earliest &+ 1
    }

    /// The earliest deadline passed at `now`, cleared: the connection acts
    /// on it (and asks again: several may have passed).
    @inlinable
    public mutating func expired(now: UInt64) -> Kind? {
        var due: Kind?
        var earliest = UInt64.max
        for kind in Kind.allCases {
            if let value = self[kind], value <= now, value < earliest { (due, earliest) = (kind, value) }
        }
        if let due { self[due] = nil }
        return due
    }

    /// Whether a timer armed for `armedAt` (0: none) still serves: it
    /// fires no later than the earliest deadline. A timer that fires
    /// early finds nothing due and is armed again.
    @inlinable @inline(__always)
    public func timerServes(armedAt: UInt64) -> Bool {
        guard let next else { return armedAt == 0 }
        return armedAt != 0 && armedAt <= next
    }
}
