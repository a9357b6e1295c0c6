/// The Host field's rules (RFC 9112 section 3.2, RFC 3986 section 3.2):
/// a value is `uri-host [ ":" port ]` or empty, and an absolute-form
/// target's authority takes the place of whatever Host was sent.
enum HostField {
    /// Whether `value` is a valid Host: a reg-name (unreserved, sub-delims
    /// and percent-encodings) or an IP literal in brackets, then an
    /// optional port of digits. Empty is valid (a URI without authority).
    static func isValid(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { b in
            var i = 0
            if b.first == 0x5B {  // "[" IPv6address / IPvFuture "]"
                i = 1
                while i < b.count && b[i] != 0x5D {
                    let c = b[i]
                    guard isUnreserved(c) || isSubDelim(c) || c == 0x3A else { return false }
                    i += 1
                }
                guard i < b.count, i > 1 else { return false }
                i += 1
            } else {
                while i < b.count && b[i] != 0x3A {
                    let c = b[i]
                    if c == 0x25 {
                        guard i + 2 < b.count, isHex(b[i + 1]), isHex(b[i + 2]) else { return false }
                        i += 3
                        continue
                    }
                    guard isUnreserved(c) || isSubDelim(c) else { return false }
                    i += 1
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
    }

    /// An absolute-form target's authority (`http://a.example:8080/x` →
    /// `a.example:8080`); nil for origin-form, "*", or an authority with
    /// userinfo (RFC 9110 section 4.2.4: an error in an http URI).
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

    private static func isUnreserved(_ c: UInt8) -> Bool {
        (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39)
            || c == 0x2D || c == 0x2E || c == 0x5F || c == 0x7E
    }

    /// ! $ & ' ( ) * + , ; =
    private static func isSubDelim(_ c: UInt8) -> Bool {
        c == 0x21 || c == 0x24 || (c >= 0x26 && c <= 0x2C) || c == 0x3B || c == 0x3D
    }

    private static func isHex(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c | 0x20 >= 0x61 && c | 0x20 <= 0x66)
    }
}
