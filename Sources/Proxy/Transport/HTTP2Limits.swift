/// Budgets that end an HTTP/2 connection whose client costs the worker
/// without asking for anything: per 10-second window, streams that ended
/// in a reset (by the client, as in rapid reset, CVE-2023-44487, or by
/// Larder for the client's errors, as in MadeYouReset, CVE-2025-8671),
/// and frames that carry no request (PING, SETTINGS, PRIORITY,
/// RST_STREAM, and WINDOW_UPDATEs that open fewer than
/// `smallWindowIncrement` bytes). Beyond either: GOAWAY with
/// ENHANCE_YOUR_CALM. A value; the connection passes the time.
struct HTTP2Limits: Equatable {
    static let windowMilliseconds: UInt64 = 10_000
    static let maxResets = 200
    static let maxControlFrames = 2_000
    static let smallWindowIncrement: Int32 = 1024

    private var windowStart: UInt64
    private(set) var resets = 0
    private(set) var controlFrames = 0

    init(now: UInt64) { windowStart = now }

    /// Counts a stream that ended in a reset; true when over the budget.
    mutating func countReset(now: UInt64) -> Bool {
        roll(now)
        resets += 1
        return resets > Self.maxResets
    }

    /// Counts a frame that carries no request; true when over the budget.
    mutating func countControl(now: UInt64) -> Bool {
        roll(now)
        controlFrames += 1
        return controlFrames > Self.maxControlFrames
    }

    private mutating func roll(_ now: UInt64) {
        guard now >= windowStart + Self.windowMilliseconds else { return }
        windowStart = now
        (resets, controlFrames) = (0, 0)
    }
}
