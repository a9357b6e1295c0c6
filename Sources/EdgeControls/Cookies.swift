/// `strip_cookies` and `key_cookies`: what a request's Cookie field
/// (RFC 6265 section 5.4: `name=value` pairs separated by `; `) means to
/// the cache.
public enum Cookies {
    /// The value of the cookie `name` in a Cookie field's value (the
    /// first of that name), or nil.
    public static func value(of name: String, in cookie: String) -> Substring? {
        for pair in cookie.split(separator: ";") {
            let pair = pair.trimmingSpaces()
            guard let equals = pair.firstIndex(of: "="), pair[..<equals].trimmingSpaces() == name else { continue }
            return pair[pair.index(after: equals)...].trimmingSpaces()
        }
        return nil
    }

    /// The variant field name that stands for one keyed cookie: a Vary
    /// name no real field can have (":" is not a name's byte), so it never
    /// collides with one, nor reaches a client or the upstream.
    public static let variantPrefix = "cookie:"

    public static func variantField(_ name: String) -> String { variantPrefix + name }

    /// The cookie a variant field names, if it is one.
    public static func keyedCookie(_ field: String) -> Substring? {
        guard field.utf8.starts(with: variantPrefix.utf8) else { return nil }
        return Substring(field.utf8.dropFirst(variantPrefix.utf8.count))
    }

    /// A cookie name (a token, RFC 6265 section 4.1.1).
    public static func isName(_ name: String) -> Bool { HeaderRules.isFieldName(name) }
}
