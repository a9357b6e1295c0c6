import CacheSemantics
import EventLoop

/// The Date header value, formatted at most once per second per worker.
struct DateHeader {
    private var second: Int64 = -1
    private(set) var current = Value(line: [])

    /// The Date of one second: the field's value, and its whole HTTP/1.1
    /// line ("Date: <IMF-fixdate>\r\n"), written once.
    struct Value {
        let line: [UInt8]
        var value: ArraySlice<UInt8> { line.isEmpty ? [] : line[6..<(line.count - 2)] }
    }

    /// The Date of the current second.
    mutating func current(now: Int64) -> Value {
        if now != second {
            second = now
            current = Value(line: Array("Date: ".utf8) + HTTPDate.format(now) + [0x0D, 0x0A])
        }
        return current
    }
}
