/// The Host field's rules (RFC 9112 section 3.2, RFC 3986 section 3.2):
/// a value is `uri-host [ ":" port ]` or empty, and an absolute-form
/// target's authority takes the place of whatever Host was sent.
enum HostField {
    /// Whether `value` is a valid Host: a reg-name (unreserved, sub-delims
    /// and percent-encodings) or an IP literal in brackets, then an
    /// optional port of digits. Empty is valid (a URI without authority).
    static func isValid(_ value: String) -> Bool {
        // (Every request carries one: no copy of the string, a table lookup per byte.)
        if let valid = value.utf8.withContiguousStorageIfAvailable({ isValid($0) }) { return valid }
        return Array(value.utf8).withUnsafeBufferPointer { isValid($0) }
    }

    static func isValid(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        if b.first == 0x5B {  // "[" IPv6address / IPvFuture "]"
            i = 1
            while i < b.count && b[i] != 0x5D {
                guard isRegNameByte(b[i]) || b[i] == 0x3A else { return false }
                i += 1
            }
            guard i < b.count, i > 1 else { return false }
            i += 1
        } else {
            while i < b.count {
                let c = b[i]
                if isRegNameByte(c) {
                    i &+= 1
                } else if c == 0x3A {
                    break
                } else if c == 0x25, i + 2 < b.count, isHex(b[i + 1]), isHex(b[i + 2]) {
                    i &+= 3
                } else {
                    return false
                }
            }
        }
        if i == b.count { return true }
        guard b[i] == 0x3A else { return false }
        i += 1
        while i < b.count {
            guard b[i] >= 0x30 && b[i] <= 0x39 else { return false }
            i += 1
        }
        return true
    }

    /// An absolute-form target's authority (`http://a.example:8080/x` →
    /// `a.example:8080`); `.none` for origin-form or "*"; `.invalid` for an
    /// empty one or one with userinfo (RFC 9110 section 4.2.4: an error in
    /// an http URI).
    enum Authority: Equatable { case none, host(String), invalid }

    static func authority(ofTarget target: String) -> Authority {
        let rest: Substring
        if target.hasPrefix("http://") { rest = target.dropFirst(7) }
        else if target.hasPrefix("https://") { rest = target.dropFirst(8) }
        else { return .none }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if authority.contains("@") || authority.isEmpty { return .invalid }
        return .host(String(authority))
    }

    /// unreserved and sub-delims (RFC 3986): ALPHA DIGIT - . _ ~ ! $ & ' ( ) * + , ; =
    /// ("1" at the byte's place; a static string needs no lazy set-up).
    private static var regNameBytes: StaticString {
        """
        0000000000000000000000000000000001001011111111101111111111010100
        0111111111111111111111111110000101111111111111111111111111100010
        0000000000000000000000000000000000000000000000000000000000000000
        0000000000000000000000000000000000000000000000000000000000000000
        """
    }

    @inline(__always)
    private static func isRegNameByte(_ c: UInt8) -> Bool {
        regNameBytes.utf8Start[Int(c) + Int(c) / 64] == 0x31  // (each row of 64 ends with a newline)
    }

    private static func isHex(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c | 0x20 >= 0x61 && c | 0x20 <= 0x66)
    }
}
