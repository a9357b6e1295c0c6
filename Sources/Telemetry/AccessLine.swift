import Bytes
#if canImport(Glibc)
import Glibc
#endif

/// One finished request as the access log and its followers tell it. Its
/// texts point into memory it does not own: it lives only inside the call
/// that hands it over (`AccessLine.with`, `PackedLines.forEach`), so that a
/// logged request copies bytes and never makes a String.
public struct AccessLine {
    /// The figures, stored as they are in a packed line: plain fields,
    /// -1 or 0 for "none", narrow where the value is (a status, a worker's
    /// number), so a line is one short copy.
    public struct Figures {
        /// Wall milliseconds when it ended (first: `PackedLines.time` reads it alone).
        public var time: Int64
        public var bodyBytes: Int
        private var firstByte: Int, total: Int, upstreamTime: Int
        private var statusCode: UInt16, upstreamCode: UInt16, workerNumber: UInt16
        /// 10, 11, 20 or 30: HTTP/1.0, HTTP/1.1, HTTP/2, HTTP/3.
        private var version: UInt8
        /// The client spoke TLS.
        public private(set) var tls: Bool
        public var result: LatencyHistograms.Result
        /// The texts' lengths, set when packed.
        fileprivate var lengths: (client: UInt16, method: UInt16, target: UInt32, cache: UInt16) = (0, 0, 0, 0)
        fileprivate var more: (host: UInt16, upstream: UInt16, sni: UInt16) = (0, 0, 0)

        public init(time: Int64, worker: Int, status: Int, bodyBytes: Int, firstByteMicroseconds: Int?,
                    totalMicroseconds: Int?, result: LatencyHistograms.Result, upstreamStatus: Int? = nil,
                    upstreamMicroseconds: Int? = nil, httpVersion: Int = 11, tls: Bool = false) {
            version = UInt8(clamping: httpVersion)
            self.tls = tls
            (self.time, self.bodyBytes, self.result) = (time, bodyBytes, result)
            (firstByte, total, upstreamTime) = (firstByteMicroseconds ?? -1, totalMicroseconds ?? -1, upstreamMicroseconds ?? -1)
            statusCode = UInt16(clamping: status)
            upstreamCode = UInt16(clamping: upstreamStatus ?? 0)
            workerNumber = UInt16(clamping: worker)
        }

        public var status: Int { Int(statusCode) }
        public var worker: Int { Int(workerNumber) }
        /// The request's protocol as the log names it.
        public var protocolName: StaticString {
            switch version {
            case 20: return "HTTP/2"
            case 30: return "HTTP/3"
            case 10: return "HTTP/1.0"
            default: return "HTTP/1.1"
            }
        }
        /// Microseconds from the request to its answer's head and last
        /// byte queued (nil: nothing was answered).
        public var firstByteMicroseconds: Int? { firstByte < 0 ? nil : firstByte }
        public var totalMicroseconds: Int? { total < 0 ? nil : total }
        /// The upstream's status and time to its head, when its head was the answer.
        public var upstreamStatus: Int? { upstreamCode == 0 ? nil : Int(upstreamCode) }
        public var upstreamMicroseconds: Int? { upstreamTime < 0 ? nil : upstreamTime }
    }

    public var figures: Figures
    public var client: UnsafeBufferPointer<UInt8>
    public var method: UnsafeBufferPointer<UInt8>
    public var target: UnsafeBufferPointer<UInt8>
    /// The Cache-Status as sent, a whole field line or its value (empty:
    /// none sent); `cacheColumn` cuts it as the log shows it.
    public var cache: UnsafeBufferPointer<UInt8>
    /// The request's Host (HTTP/2: its authority), the upstream server that
    /// answered (host:port; empty for an answer from the cache), the TLS
    /// server name the client sent (empty: none, or no TLS).
    public var host = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
    public var upstream = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
    public var sni = UnsafeBufferPointer<UInt8>(start: nil, count: 0)

    public init(figures: Figures, client: UnsafeBufferPointer<UInt8>, method: UnsafeBufferPointer<UInt8>,
                target: UnsafeBufferPointer<UInt8>, cache: UnsafeBufferPointer<UInt8>) {
        (self.figures, self.client, self.method, self.target, self.cache) = (figures, client, method, target, cache)
    }

    /// The texts a line carries besides the request line's (`with`).
    public struct Where {
        public var host: String?
        public var upstream: String?
        public var sni: String?
        public init(host: String? = nil, upstream: String? = nil, sni: String? = nil) {
            (self.host, self.upstream, self.sni) = (host, upstream, sni)
        }
    }

    /// The Cache-Status value without field name, cache name or line end
    /// ("hit; ttl=55"; empty when none was sent). Cut where the line is
    /// formatted, not on the worker, and compared in place.
    public static func cacheColumn(_ sent: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        guard let base = sent.baseAddress else { return sent }
        var start = 0, end = sent.count
        func skip(_ text: StaticString) {
            let n = text.utf8CodeUnitCount
            if end - start >= n && memcmp(base + start, text.utf8Start, n) == 0 { start += n }
        }
        skip("Cache-Status: ")
        skip("larder; ")
        while end > start && (sent[end - 1] == 0x0D || sent[end - 1] == 0x0A) { end -= 1 }
        return UnsafeBufferPointer(rebasing: sent[start..<end])
    }

    /// `body` with the line whose texts are these strings' bytes.
    @inline(__always)
    public static func with<R>(_ figures: Figures, client: String, method: String, target: String,
                               cache: [UInt8], at place: Where = Where(), _ body: (AccessLine) -> R) -> R {
        withBytes(client) { client in
            withBytes(method) { method in
                withBytes(target) { target in
                    cache.withUnsafeBufferPointer { cache in
                        withBytes(place.host ?? "") { host in
                            withBytes(place.upstream ?? "") { upstream in
                                withBytes(place.sni ?? "") { sni in
                                    var line = AccessLine(figures: figures, client: client, method: method, target: target, cache: cache)
                                    (line.host, line.upstream, line.sni) = (host, upstream, sni)
                                    return body(line)
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    @inline(__always)
    private static func withBytes<R>(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(text.utf8).withUnsafeBufferPointer(body)
    }
}

/// Access lines packed one after another in a `ByteBuffer`: the figures as
/// they are in memory, then the texts (a worker's queue for the log's
/// followers: one copy per request, no allocation).
public enum PackedLines {
    private static let figuresSize = MemoryLayout<AccessLine.Figures>.size

    /// The bytes `line` takes packed.
    @inline(__always)
    public static func size(_ line: AccessLine) -> Int {
        figuresSize + line.client.count + line.method.count + line.target.count + line.cache.count
            + line.host.count + line.upstream.count + line.sni.count
    }

    /// Packs `line` at the buffer's end (texts cut to what their lengths hold).
    @inline(__always)
    public static func append(_ line: AccessLine, to buffer: ByteBuffer) {
        var figures = line.figures
        let client = UnsafeBufferPointer(rebasing: line.client.prefix(Int(UInt16.max)))
        let method = UnsafeBufferPointer(rebasing: line.method.prefix(Int(UInt16.max)))
        let target = UnsafeBufferPointer(rebasing: line.target.prefix(Int(UInt32.max)))
        let cache = UnsafeBufferPointer(rebasing: line.cache.prefix(Int(UInt16.max)))
        let host = UnsafeBufferPointer(rebasing: line.host.prefix(Int(UInt16.max)))
        let upstream = UnsafeBufferPointer(rebasing: line.upstream.prefix(Int(UInt16.max)))
        let sni = UnsafeBufferPointer(rebasing: line.sni.prefix(Int(UInt16.max)))
        figures.lengths = (UInt16(client.count), UInt16(method.count), UInt32(target.count), UInt16(cache.count))
        figures.more = (UInt16(host.count), UInt16(upstream.count), UInt16(sni.count))
        var p = buffer.end(reserving: size(line))
        UnsafeMutableRawPointer(p).storeBytes(of: figures, as: AccessLine.Figures.self)
        p += figuresSize
        ByteWriting.put(client, at: &p)
        ByteWriting.put(method, at: &p)
        ByteWriting.put(target, at: &p)
        ByteWriting.put(cache, at: &p)
        ByteWriting.put(host, at: &p)
        ByteWriting.put(upstream, at: &p)
        ByteWriting.put(sni, at: &p)
        buffer.commit(upTo: p)
    }

    /// The line packed at `offset` and where the next begins.
    @inline(__always)
    public static func line(at offset: Int, in bytes: UnsafeBufferPointer<UInt8>) -> (line: AccessLine, next: Int) {
        let start = bytes.baseAddress! + offset
        let figures = UnsafeRawPointer(start).loadUnaligned(as: AccessLine.Figures.self)
        var p = start + figuresSize
        func text(_ count: Int) -> UnsafeBufferPointer<UInt8> {
            defer { p += count }
            return UnsafeBufferPointer(start: p, count: count)
        }
        var line = AccessLine(figures: figures, client: text(Int(figures.lengths.client)), method: text(Int(figures.lengths.method)),
                              target: text(Int(figures.lengths.target)), cache: text(Int(figures.lengths.cache)))
        (line.host, line.upstream, line.sni) = (text(Int(figures.more.host)), text(Int(figures.more.upstream)), text(Int(figures.more.sni)))
        return (line, p - bytes.baseAddress!)
    }

    /// Wall milliseconds of the line packed at `offset` (the figures' first field).
    @inline(__always)
    public static func time(at offset: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Int64 {
        UnsafeRawPointer(bytes.baseAddress! + offset).loadUnaligned(as: Int64.self)
    }

    public static func forEach(in bytes: UnsafeBufferPointer<UInt8>, _ body: (AccessLine) -> Void) {
        var offset = 0
        while offset < bytes.count {
            let (line, next) = line(at: offset, in: bytes)
            body(line)
            offset = next
        }
    }
}
