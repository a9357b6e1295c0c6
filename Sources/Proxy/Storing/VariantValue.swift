import EdgeControls
import HTTPHeaders

/// A request's value for a variant field: a request field's (Vary,
/// key_headers), or, for a `key_cookies` name (`cookie:NAME`), that one
/// cookie's value from its Cookie field.
enum VariantValue {
    @inline(__always)
    static func of(_ name: String, in headers: HeaderFields) -> String? {
        guard let cookie = Cookies.keyedCookie(name) else { return headers.combined(name) }
        return headers.values("cookie").lazy.compactMap { Cookies.value(of: String(cookie), in: $0) }.first.map(String.init)
    }
}
