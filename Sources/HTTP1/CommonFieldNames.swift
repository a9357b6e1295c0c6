/// Field names nearly every request carries, as string literals: a name
/// among them costs a comparison of its bytes, not a new string (about 85
/// instructions for each name built; every HTTP/1.1 request has a Host).
public enum CommonFieldNames {
    /// The lowercase name when the token `b[from..<to]` is one of them in
    /// any case; nil otherwise.
    @inline(__always)
    static func match(_ b: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> String? {
        switch to - from {
        case 4: return b.equalsLowercased(from, "host") ? "host" : nil
        case 5: return b.equalsLowercased(from, "range") ? "range" : nil
        case 6:
            if b.equalsLowercased(from, "accept") { return "accept" }
            return b.equalsLowercased(from, "cookie") ? "cookie" : nil
        case 10:
            if b.equalsLowercased(from, "user-agent") { return "user-agent" }
            return b.equalsLowercased(from, "connection") ? "connection" : nil
        case 12: return b.equalsLowercased(from, "content-type") ? "content-type" : nil
        case 13:
            if b.equalsLowercased(from, "cache-control") { return "cache-control" }
            if b.equalsLowercased(from, "if-none-match") { return "if-none-match" }
            return b.equalsLowercased(from, "authorization") ? "authorization" : nil
        case 14: return b.equalsLowercased(from, "content-length") ? "content-length" : nil
        case 15:
            if b.equalsLowercased(from, "accept-encoding") { return "accept-encoding" }
            return b.equalsLowercased(from, "accept-language") ? "accept-language" : nil
        case 17: return b.equalsLowercased(from, "if-modified-since") ? "if-modified-since" : nil
        default: return nil
        }
    }

    /// A lowercase name's String: a literal when it is a common one (HTTP/2
    /// fields arrive in lower case).
    public static func string(_ name: UnsafeRawBufferPointer) -> String {
        let b = name.assumingMemoryBound(to: UInt8.self)
        return match(b, 0, b.count) ?? String(decoding: name, as: UTF8.self)
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// Whether the bytes from `from` are `lowercase` in any case. For the
    /// token characters of a field name, `| 0x20` folds only letters onto
    /// lowercase letters ('-' stays '-'; no other token character lands on
    /// a letter or on '-').
    @inline(__always)
    fileprivate func equalsLowercased(_ from: Int, _ lowercase: StaticString) -> Bool {
        let literal = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        for k in 0..<literal.count where self[from + k] | 0x20 != literal[k] { return false }
        return true
    }
}
