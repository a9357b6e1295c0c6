import Bytes
#if canImport(Glibc)
import Glibc
#endif

/// Writes access lines as text or as JSON objects, one per line, into a
/// `ByteBuffer`: room made once per line, every piece a copy at a cursor.
/// The time is formatted once per second.
public struct AccessLineFormatter {
    private var second: Int64 = -1
    private var stamp: [UInt8] = []

    public init() {}

    /// `TIME CLIENT METHOD TARGET STATUS BYTES MILLISECONDS "CACHE"`.
    public mutating func appendText(_ line: AccessLine, to out: ByteBuffer) {
        let figures = line.figures
        updateStamp(figures.time)
        var p = out.end(reserving: 160 + line.client.count + line.method.count + line.target.count + line.cache.count)
        stamp.withUnsafeBufferPointer { ByteWriting.put($0, at: &p) }
        ByteWriting.put(" ", at: &p)
        ByteWriting.put(line.client, at: &p)
        ByteWriting.put(" ", at: &p)
        ByteWriting.put(line.method, at: &p)
        ByteWriting.put(" ", at: &p)
        ByteWriting.put(line.target, at: &p)
        ByteWriting.put(" ", at: &p)
        ByteWriting.putDecimal(figures.status, at: &p)
        ByteWriting.put(" ", at: &p)
        ByteWriting.putDecimal(figures.bodyBytes, at: &p)
        ByteWriting.put(" ", at: &p)
        ByteWriting.putDecimal((figures.totalMicroseconds ?? 0) / 1000, at: &p)
        ByteWriting.put(" \"", at: &p)
        let cache = AccessLine.cacheColumn(line.cache)
        if cache.isEmpty { ByteWriting.put("-", at: &p) } else { ByteWriting.put(cache, at: &p) }
        ByteWriting.put("\"\n", at: &p)
        out.commit(upTo: p)
    }

    /// One JSON object and a newline (`access_log_format = "json"`, and
    /// what `larder log --follow` prints). Every line is valid JSON,
    /// whatever bytes the request carried.
    public mutating func appendJSON(_ line: AccessLine, to out: ByteBuffer) {
        let figures = line.figures
        updateStamp(figures.time)
        // Fixed keys and figures take under 512 bytes; a text byte at most six.
        var p = out.end(reserving: 512 + 6 * (line.client.count + line.method.count + line.target.count + line.cache.count))
        ByteWriting.put("{\"time\":\"", at: &p)
        stamp.withUnsafeBufferPointer { ByteWriting.put($0, at: &p) }
        ByteWriting.put("\",\"client\":\"", at: &p)
        ByteWriting.put(line.client, at: &p)  // an address as inet_ntop wrote it: nothing to escape
        ByteWriting.put("\",\"method\":\"", at: &p)
        ByteWriting.putJSONEscaped(line.method, at: &p)
        ByteWriting.put("\",\"target\":\"", at: &p)
        ByteWriting.putJSONEscaped(line.target, at: &p)
        ByteWriting.put("\",\"protocol\":\"", at: &p)
        ByteWriting.put(figures.protocolName, at: &p)
        ByteWriting.put("\",\"status\":", at: &p)
        ByteWriting.putDecimal(figures.status, at: &p)
        ByteWriting.put(",\"bytes\":", at: &p)
        ByteWriting.putDecimal(figures.bodyBytes, at: &p)
        Self.putMilliseconds(",\"first_byte_ms\":", figures.firstByteMicroseconds, at: &p)
        Self.putMilliseconds(",\"total_ms\":", figures.totalMicroseconds, at: &p)
        ByteWriting.put(",\"result\":\"", at: &p)
        ByteWriting.put(figures.result.text, at: &p)
        ByteWriting.put("\",\"cache\":\"", at: &p)
        let cache = AccessLine.cacheColumn(line.cache)
        if cache.isEmpty { ByteWriting.put("-", at: &p) } else { ByteWriting.putJSONEscaped(cache, at: &p) }
        ByteWriting.put("\"", at: &p)
        if let status = figures.upstreamStatus {
            ByteWriting.put(",\"upstream_status\":", at: &p)
            ByteWriting.putDecimal(status, at: &p)
        }
        Self.putMilliseconds(",\"upstream_ms\":", figures.upstreamMicroseconds, at: &p)
        ByteWriting.put(",\"worker\":", at: &p)
        ByteWriting.putDecimal(figures.worker, at: &p)
        ByteWriting.put("}\n", at: &p)
        out.commit(upTo: p)
    }

    /// `key` and the milliseconds; nothing when there are none.
    @inline(__always)
    private static func putMilliseconds(_ key: StaticString, _ microseconds: Int?, at p: inout UnsafeMutablePointer<UInt8>) {
        guard let microseconds else { return }
        ByteWriting.put(key, at: &p)
        ByteWriting.putMilliseconds(microseconds, at: &p)
    }

    @inline(__always)
    private mutating func updateStamp(_ now: Int64) {
        guard now != second else { return }
        second = now
        stamp = Self.iso8601(now)
    }

    /// 2026-11-22T10:31:59Z
    public static func iso8601(_ seconds: Int64) -> [UInt8] {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ v: Int32) -> [UInt8] { [UInt8(48 + v / 10), UInt8(48 + v % 10)] }
        let year = Int(parts.tm_year) + 1900
        return Array(String(year).utf8) + [UInt8(ascii: "-")] + two(parts.tm_mon + 1) + [UInt8(ascii: "-")] + two(parts.tm_mday)
            + [UInt8(ascii: "T")] + two(parts.tm_hour) + [UInt8(ascii: ":")] + two(parts.tm_min) + [UInt8(ascii: ":")]
            + two(parts.tm_sec) + [UInt8(ascii: "Z")]
    }
}
