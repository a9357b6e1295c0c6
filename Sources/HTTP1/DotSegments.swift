/// RFC 3986 section 5.2.4: the path of a request target without "." and
/// ".." segments, also when they are percent-encoded ("%2e", as origins
/// decode them). Applied once when a request is parsed, so routing, the
/// cache key and the upstream all see the same path: a client cannot climb
/// out of a route (`/static/../private`) or above the upstream's base path
/// (`/../x`; ".." at the root stays at the root).
public enum DotSegments {
    /// The target with its path normalized (query untouched); the same
    /// String when there is nothing to remove (the usual case).
    public static func normalize(_ target: String) -> String {
        // Native strings (all the parser makes) have contiguous UTF-8: no copy.
        let result = target.utf8.withContiguousStorageIfAvailable { b -> String? in
            guard let (start, end) = pathRange(b), mayHaveDotSegment(b, start, end) else { return nil }
            var out: [UInt8] = []
            out.reserveCapacity(b.count)
            out.append(contentsOf: b[0..<start])
            let pathStart = out.count
            // Segments after the leading "/", each kept, dropped, or undoing the last.
            var segmentStarts: [Int] = []
            var i = start + 1
            while true {
                var j = i
                while j < end && b[j] != 0x2F { j += 1 }
                let isLast = j >= end
                switch kind(b, i, j) {
                case .current:
                    if isLast { out.append(0x2F) }
                case .parent:
                    if let last = segmentStarts.popLast() { out.removeSubrange(last...) }
                    if isLast { out.append(0x2F) }
                case .other:
                    segmentStarts.append(out.count)
                    out.append(0x2F)
                    out.append(contentsOf: b[i..<j])
                }
                if isLast { break }
                i = j + 1
            }
            if out.count == pathStart { out.append(0x2F) }
            out.append(contentsOf: b[end..<b.count])
            return String(decoding: out, as: UTF8.self)
        }
        if let result { return result ?? target }
        var copy = target
        copy.makeContiguousUTF8()
        return normalize(copy)
    }

    /// Whether the path would have dot segments if "\\", "%2F" or "%5C"
    /// separated segments, as some origins decode them (`/static/..%2fx`,
    /// `/static/..\\x`). Asked after `normalize`: such a target cannot be
    /// routed and keyed the same way the origin will read it, so it is refused.
    public static func isAmbiguous(_ target: String) -> Bool {
        var target = target
        return target.withUTF8 { b -> Bool in
            guard let (start, end) = pathRange(b) else { return false }
            var i = start, segment = start
            while i <= end {
                var separator = 0
                if i == end || b[i] == 0x2F || b[i] == 0x5C { separator = 1 }
                else if b[i] == 0x25, i + 3 <= end, (b[i + 1] == 0x32 && b[i + 2] | 0x20 == 0x66)
                            || (b[i + 1] == 0x35 && b[i + 2] | 0x20 == 0x63) { separator = 3 }
                if separator > 0 {
                    if i > segment, kind(b, segment, i) != .other { return true }
                    i += separator
                    segment = i
                } else {
                    i += 1
                }
            }
            return false
        }
    }

    /// Where the path is: origin-form from 0; absolute-form after the
    /// authority. nil when there is no path ("*", "http://host?q").
    private static func pathRange(_ b: UnsafeBufferPointer<UInt8>) -> (Int, Int)? {
        var start = 0
        if b.first != 0x2F {
            var i = 0
            while i + 2 < b.count && !(b[i] == 0x3A && b[i + 1] == 0x2F && b[i + 2] == 0x2F) { i += 1 }
            guard i + 2 < b.count else { return nil }
            i += 3
            while i < b.count && b[i] != 0x2F && b[i] != 0x3F { i += 1 }
            guard i < b.count, b[i] == 0x2F else { return nil }
            start = i
        }
        var end = start
        while end < b.count && b[end] != 0x3F && b[end] != 0x23 { end += 1 }
        return (start, end)
    }

    /// A dot segment starts right after a "/" with "." or "%2".
    private static func mayHaveDotSegment(_ b: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        var i = start
        while i + 1 < end {
            if b[i] == 0x2F && (b[i + 1] == 0x2E || b[i + 1] == 0x25) { return true }
            i += 1
        }
        return false
    }

    private enum Kind { case current, parent, other }

    /// "." or ".." written with "." or "%2e" (either case) for each dot.
    private static func kind(_ b: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> Kind {
        var dots = 0
        var i = from
        while i < to {
            if b[i] == 0x2E {
                i += 1
            } else if b[i] == 0x25, i + 3 <= to, b[i + 1] == 0x32, b[i + 2] | 0x20 == 0x65 {
                i += 3
            } else {
                return .other
            }
            dots += 1
            if dots > 2 { return .other }
        }
        return dots == 1 ? .current : dots == 2 ? .parent : .other
    }
}
