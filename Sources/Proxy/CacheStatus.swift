import HTTP1

/// Cache-Status field values (RFC 9211) with the cache name "larder".
enum CacheStatus {
    /// The reason a request went upstream.
    enum Forward: String {
        case bypass, method, uriMiss = "uri-miss", varyMiss = "vary-miss", miss, request, stale, partial
    }

    /// `detail`: "fleet" (found in the fleet's shared tier),
    /// "upstream-unreachable" (served stale because the upstream is gone).
    static func hit(ttl: Int, detail: String? = nil) -> [UInt8] {
        guard detail != nil || ttl < 0 else {
            // Every plain hit comes here: written on the stack, then one
            // allocation (reserveCapacity's is specialised; an array made
            // with `repeating:` or uninitialised capacity looks up its
            // type's metadata at run time, 360 instructions).
            var out: [UInt8] = []
            out.reserveCapacity(56)
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 56) { buffer in
                var p = buffer.baseAddress!
                ByteWriting.put("Cache-Status: larder; hit; ttl=", at: &p)
                ByteWriting.putDecimal(ttl, at: &p)
                ByteWriting.put("\r\n", at: &p)
                out.append(contentsOf: UnsafeBufferPointer(start: buffer.baseAddress, count: p - buffer.baseAddress!))
            }
            return out
        }
        var out: [UInt8] = []
        out.reserveCapacity(64)  // room for the digits: one allocation per hit, not two
        out.append(contentsOf: "Cache-Status: larder; hit; ttl=".utf8)
        ResponseSerializer.appendDecimal(ttl, to: &out)
        if let detail {
            out.append(contentsOf: "; detail=".utf8)
            out.append(contentsOf: detail.utf8)
        }
        out.append(contentsOf: [0x0D, 0x0A])
        return out
    }

    static func forward(_ reason: Forward, stored: Bool, fwdStatus: Int? = nil, detail: String? = nil) -> String {
        var value = "larder; fwd=\(reason.rawValue)"
        if let fwdStatus { value += "; fwd-status=\(fwdStatus)" }
        if stored { value += "; stored" }
        if let detail { value += "; detail=\(detail)" }
        return value
    }
}
