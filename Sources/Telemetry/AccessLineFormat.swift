import Bytes
#if canImport(Glibc)
import Glibc
#endif

/// Writes access lines as text, as JSON objects or by a template, one per
/// line, into a `ByteBuffer`: room made once per line, every piece a copy
/// at a cursor. The time's seconds are formatted once per second.
public struct AccessLineFormatter {
    private var second: Int64 = .min
    /// "2026-11-22T10:31:59" for `second`.
    private var stamp: [UInt8] = []

    public init() {}

    /// One line in `format`.
    public mutating func append(_ line: AccessLine, as format: AccessLogFormat, to out: ByteBuffer) {
        switch format {
        case .text: appendText(line, to: out)
        case .json: appendJSON(line, to: out)
        case .custom(let template): append(line, template, to: out)
        }
    }

    /// `TIME CLIENT METHOD TARGET STATUS BYTES MILLISECONDS "CACHE" HOST
    /// PROTOCOL UPSTREAM SNI` (`-` for what there is none of).
    public mutating func appendText(_ line: AccessLine, to out: ByteBuffer) {
        let figures = line.figures
        var p = out.end(reserving: 200 + texts(line))
        putTime(figures.time, at: &p)
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
        Self.putOrDash(AccessLine.cacheColumn(line.cache), at: &p)
        ByteWriting.put("\" ", at: &p)
        Self.putOrDash(line.host, at: &p)
        ByteWriting.put(" ", at: &p)
        ByteWriting.put(figures.protocolName, at: &p)
        ByteWriting.put(" ", at: &p)
        Self.putOrDash(line.upstream, at: &p)
        ByteWriting.put(" ", at: &p)
        Self.putOrDash(line.sni, at: &p)
        ByteWriting.put("\n", at: &p)
        out.commit(upTo: p)
    }

    /// One JSON object and a newline (`access_log_format = "json"`, and
    /// what `larder log --follow` prints). Every line is valid JSON,
    /// whatever bytes the request carried.
    public mutating func appendJSON(_ line: AccessLine, to out: ByteBuffer) {
        let figures = line.figures
        // Fixed keys and figures take under 512 bytes; a text byte at most six.
        var p = out.end(reserving: 512 + 6 * texts(line))
        ByteWriting.put("{\"time\":\"", at: &p)
        putTime(figures.time, at: &p)
        ByteWriting.put("\",\"client\":\"", at: &p)
        ByteWriting.put(line.client, at: &p)  // an address as inet_ntop wrote it: nothing to escape
        ByteWriting.put("\",\"host\":\"", at: &p)
        ByteWriting.putJSONEscaped(line.host, at: &p)
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
        ByteWriting.put("\",\"upstream_addr\":\"", at: &p)
        ByteWriting.putJSONEscaped(line.upstream, at: &p)
        ByteWriting.put("\"", at: &p)
        if let status = figures.upstreamStatus {
            ByteWriting.put(",\"upstream_status\":", at: &p)
            ByteWriting.putDecimal(status, at: &p)
        }
        Self.putMilliseconds(",\"upstream_ms\":", figures.upstreamMicroseconds, at: &p)
        if figures.tls {
            ByteWriting.put(",\"tls_sni\":\"", at: &p)
            ByteWriting.putJSONEscaped(line.sni, at: &p)
            ByteWriting.put("\"", at: &p)
        }
        ByteWriting.put(",\"worker\":", at: &p)
        ByteWriting.putDecimal(figures.worker, at: &p)
        ByteWriting.put("}\n", at: &p)
        out.commit(upTo: p)
    }

    /// The line `template` says, `-` for a field there is none of.
    public mutating func append(_ line: AccessLine, _ template: AccessTemplate, to out: ByteBuffer) {
        let figures = line.figures
        var p = out.end(reserving: template.literalBytes + template.pieces.count * (40 + texts(line)) + 1)
        for piece in template.pieces {
            switch piece {
            case .literal(let bytes): bytes.withUnsafeBufferPointer { ByteWriting.put($0, at: &p) }
            case .field(let field):
                switch field {
                case .time: putTime(figures.time, at: &p)
                case .client: ByteWriting.put(line.client, at: &p)
                case .host: Self.putOrDash(line.host, at: &p)
                case .method: ByteWriting.put(line.method, at: &p)
                case .target: ByteWriting.put(line.target, at: &p)
                case .protocol: ByteWriting.put(figures.protocolName, at: &p)
                case .status: ByteWriting.putDecimal(figures.status, at: &p)
                case .bytes: ByteWriting.putDecimal(figures.bodyBytes, at: &p)
                case .first_byte_ms: Self.putMillisecondsOrDash(figures.firstByteMicroseconds, at: &p)
                case .total_ms: Self.putMillisecondsOrDash(figures.totalMicroseconds, at: &p)
                case .result: ByteWriting.put(figures.result.text, at: &p)
                case .cache: Self.putOrDash(AccessLine.cacheColumn(line.cache), at: &p)
                case .upstream_addr: Self.putOrDash(line.upstream, at: &p)
                case .upstream_status:
                    if let status = figures.upstreamStatus { ByteWriting.putDecimal(status, at: &p) } else { ByteWriting.put("-", at: &p) }
                case .upstream_ms: Self.putMillisecondsOrDash(figures.upstreamMicroseconds, at: &p)
                case .tls_sni: Self.putOrDash(line.sni, at: &p)
                case .worker: ByteWriting.putDecimal(figures.worker, at: &p)
                }
            }
        }
        ByteWriting.put("\n", at: &p)
        out.commit(upTo: p)
    }

    private func texts(_ line: AccessLine) -> Int {
        line.client.count + line.method.count + line.target.count + line.cache.count + line.host.count + line.upstream.count
            + line.sni.count
    }

    @inline(__always)
    private static func putOrDash(_ text: UnsafeBufferPointer<UInt8>, at p: inout UnsafeMutablePointer<UInt8>) {
        if text.isEmpty { ByteWriting.put("-", at: &p) } else { ByteWriting.put(text, at: &p) }
    }

    /// `key` and the milliseconds; nothing when there are none.
    @inline(__always)
    private static func putMilliseconds(_ key: StaticString, _ microseconds: Int?, at p: inout UnsafeMutablePointer<UInt8>) {
        guard let microseconds else { return }
        ByteWriting.put(key, at: &p)
        ByteWriting.putMilliseconds(microseconds, at: &p)
    }

    private static func putMillisecondsOrDash(_ microseconds: Int?, at p: inout UnsafeMutablePointer<UInt8>) {
        if let microseconds { ByteWriting.putMilliseconds(microseconds, at: &p) } else { ByteWriting.put("-", at: &p) }
    }

    /// RFC 3339 in UTC with milliseconds: 2026-11-22T10:31:59.042Z.
    @inline(__always)
    private mutating func putTime(_ milliseconds: Int64, at p: inout UnsafeMutablePointer<UInt8>) {
        let (seconds, rest) = Self.split(milliseconds)
        if seconds != second {
            second = seconds
            stamp = Self.iso8601(seconds).dropLast()  // (its "Z" follows the milliseconds)
        }
        stamp.withUnsafeBufferPointer { ByteWriting.put($0, at: &p) }
        p[0] = UInt8(ascii: ".")
        p[1] = UInt8(48 + rest / 100)
        p[2] = UInt8(48 + rest / 10 % 10)
        p[3] = UInt8(48 + rest % 10)
        p[4] = UInt8(ascii: "Z")
        p += 5
    }

    /// Seconds and the milliseconds past them (before 1970 too).
    static func split(_ milliseconds: Int64) -> (seconds: Int64, milliseconds: Int) {
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        return (seconds, Int(milliseconds - seconds * 1000))
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
