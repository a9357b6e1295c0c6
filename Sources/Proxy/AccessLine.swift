import HTTP1

/// One request as the access log (and a follower of the log) tells it.
public struct AccessLine: Sendable {
    public var client: String
    public var method: String
    public var target: String
    public var status: Int
    public var bodyBytes: Int
    /// Microseconds from the request to its answer's head and last byte
    /// queued (nil: nothing was answered).
    public var firstByteMicroseconds: Int?
    public var totalMicroseconds: Int?
    public var result: LatencyHistograms.Result
    /// The Cache-Status value without the cache's name ("-": none).
    public var cache: String
    /// The upstream's status and time to its head, when its head was the answer.
    public var upstreamStatus: Int?
    public var upstreamMicroseconds: Int?

}

/// Lines of the log for its followers, as JSON, one after another (the
/// time is formatted once per second, as in the access log).
public struct AccessJSONWriter {
    private var buffer = AccessLogBuffer()

    public init() {}

    public mutating func append(_ line: AccessLine, time: Int64, worker: Int) {
        buffer.appendJSON(line, now: time, worker: worker)
    }

    public mutating func append(_ text: String) { buffer.bytes.append(contentsOf: text.utf8) }

    public var isEmpty: Bool { buffer.bytes.isEmpty }

    /// What was written since the last `take`.
    public mutating func take() -> [UInt8] { buffer.take() }
}

extension AccessLogBuffer {
    /// Appends `line` as one JSON object and a newline (`access_log_format = "json"`).
    mutating func appendJSON(_ line: AccessLine, now: Int64, worker: Int) {
        bytes.append(contentsOf: "{\"time\":\"".utf8)
        appendTime(now)
        bytes.append(contentsOf: "\",\"client\":".utf8)
        Self.appendJSONString(line.client, to: &bytes)
        bytes.append(contentsOf: ",\"method\":".utf8)
        Self.appendJSONString(line.method, to: &bytes)
        bytes.append(contentsOf: ",\"target\":".utf8)
        Self.appendJSONString(line.target, to: &bytes)
        bytes.append(contentsOf: ",\"status\":".utf8)
        ResponseSerializer.appendDecimal(line.status, to: &bytes)
        bytes.append(contentsOf: ",\"bytes\":".utf8)
        ResponseSerializer.appendDecimal(line.bodyBytes, to: &bytes)
        Self.appendMilliseconds(",\"first_byte_ms\":", line.firstByteMicroseconds, to: &bytes)
        Self.appendMilliseconds(",\"total_ms\":", line.totalMicroseconds, to: &bytes)
        bytes.append(contentsOf: ",\"result\":\"".utf8)
        bytes.append(contentsOf: line.result.label.utf8)
        bytes.append(contentsOf: "\",\"cache\":".utf8)
        Self.appendJSONString(line.cache, to: &bytes)
        if let status = line.upstreamStatus {
            bytes.append(contentsOf: ",\"upstream_status\":".utf8)
            ResponseSerializer.appendDecimal(status, to: &bytes)
        }
        Self.appendMilliseconds(",\"upstream_ms\":", line.upstreamMicroseconds, to: &bytes)
        bytes.append(contentsOf: ",\"worker\":".utf8)
        ResponseSerializer.appendDecimal(worker, to: &bytes)
        bytes.append(contentsOf: "}\n".utf8)
    }

    /// `key` (`,"name":`) and the milliseconds with microsecond digits; nothing for nil.
    private static func appendMilliseconds(_ key: StaticString, _ microseconds: Int?, to out: inout [UInt8]) {
        guard let microseconds else { return }
        out.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        ResponseSerializer.appendDecimal(microseconds / 1000, to: &out)
        out.append(UInt8(ascii: "."))
        let fraction = microseconds % 1000
        out.append(contentsOf: [UInt8(48 + fraction / 100), UInt8(48 + fraction / 10 % 10), UInt8(48 + fraction % 10)])
    }

    /// A JSON string: quotes, backslashes and control bytes escaped; a byte
    /// above 0x7F (a target is bytes, not UTF-8) as \u00XX, so every line
    /// is valid JSON whatever the request carried.
    static func appendJSONString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // The usual text needs no escape: appended in one piece.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            out.append(contentsOf: text.utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        let hex = Array("0123456789abcdef".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                out.append(UInt8(ascii: "\\"))
                out.append(byte)
            case 0x20..<0x7F:
                out.append(byte)
            default:
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
