import Bytes
import HTTP1

/// Cache-Status field values (RFC 9211) with the cache name "larder".
enum CacheStatus {
    /// The reason a request went upstream.
    enum Forward: String {
        case bypass, method, uriMiss = "uri-miss", varyMiss = "vary-miss", miss, request, stale, partial
    }

    /// `detail`: "fleet" (found in the fleet's shared tier),
    /// "upstream-unreachable" (served stale because the upstream is gone).
    static func hit(ttl: Int, detail: String? = nil) -> CacheStatusLine {
        // Every plain hit: written where the head's tail is, no array.
        guard detail != nil || ttl < 0 else { return .hit(ttl: ttl) }
        var out: [UInt8] = []
        out.reserveCapacity(64)  // room for the digits: one allocation, not two
        out.append(contentsOf: "Cache-Status: larder; hit; ttl=".utf8)
        ResponseSerializer.appendDecimal(ttl, to: &out)
        if let detail {
            out.append(contentsOf: "; detail=".utf8)
            out.append(contentsOf: detail.utf8)
        }
        out.append(contentsOf: [0x0D, 0x0A])
        return .bytes(out)
    }

    static func forward(_ reason: Forward, stored: Bool, fwdStatus: Int? = nil, detail: String? = nil) -> String {
        var value = "larder; fwd=\(reason.rawValue)"
        if let fwdStatus { value += "; fwd-status=\(fwdStatus)" }
        if stored { value += "; stored" }
        if let detail { value += "; detail=\(detail)" }
        return value
    }
}

/// A whole "Cache-Status: ...\r\n" line for a stored answer. A plain hit's
/// is written straight into the head's tail (an array of its own cost an
/// allocation and a free on every hit, about 270 instructions); the access
/// log, when on, gets its bytes.
enum CacheStatusLine: Equatable {
    /// A plain hit, `ttl` at least 0 (`CacheStatus.hit` makes the others bytes).
    case hit(ttl: Int)
    case bytes([UInt8])

    init(_ value: String) { self = .bytes(Array("Cache-Status: \(value)\r\n".utf8)) }

    /// At most this many bytes are written.
    var capacity: Int {
        switch self {
        case .hit: return 56  // the 31-byte prefix, up to 19 digits, CRLF
        case .bytes(let bytes): return bytes.count
        }
    }

    func write(at p: inout UnsafeMutablePointer<UInt8>) {
        switch self {
        case .hit(let ttl):
            ByteWriting.put("Cache-Status: larder; hit; ttl=", at: &p)
            ByteWriting.putDecimal(ttl, at: &p)
            ByteWriting.put("\r\n", at: &p)
        case .bytes(let bytes):
            bytes.withUnsafeBufferPointer { ByteWriting.put($0, at: &p) }
        }
    }

    /// The field's value alone, appended (an HTTP/2 head's).
    func appendValue(to out: inout [UInt8]) {
        switch self {
        case .hit(let ttl):
            out += "larder; hit; ttl=".utf8
            ResponseSerializer.appendDecimal(ttl, to: &out)
        case .bytes(let bytes):
            out += bytes.dropFirst("Cache-Status: ".utf8.count).dropLast(2)
        }
    }

    /// The field's value alone (what a passed-on head is given).
    var value: String {
        let line = bytes
        return String(decoding: line.dropFirst("Cache-Status: ".utf8.count).dropLast(2), as: UTF8.self)
    }

    var bytes: [UInt8] {
        if case .bytes(let bytes) = self { return bytes }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer in
            var p = buffer.baseAddress!
            write(at: &p)
            return Array(UnsafeBufferPointer(start: buffer.baseAddress, count: p - buffer.baseAddress!))
        }
    }
}
