import CacheSemantics
import EventLoop

/// The Date header value, formatted at most once per second per worker.
struct DateHeader {
    private var second: Int64 = -1
    private(set) var bytes: [UInt8] = []

    /// "Date: <IMF-fixdate>\r\n" for the current second.
    mutating func current(now: Int64) -> [UInt8] {
        if now != second {
            second = now
            bytes = Array("Date: ".utf8) + HTTPDate.format(now) + [0x0D, 0x0A]
        }
        return bytes
    }
}
