import EdgeControls
import HTTPHeaders

/// A request's value for a variant field: a request field's (Vary,
/// key_headers), or, for a `key_cookies` name (`cookie:NAME`), that one
/// cookie's value from its Cookie field.
enum VariantValue {
    @inline(__always)
    static func of(_ name: String, in headers: HeaderFields) -> String? {
        // A field name has no ':': only a keyed cookie's (`Cookies.variantField`) has one, at its prefix's end.
        let utf8 = name.utf8, colon = Cookies.variantPrefix.utf8.count - 1
        guard utf8.count > colon + 1, utf8[utf8.index(utf8.startIndex, offsetBy: colon)] == UInt8(ascii: ":") else {
            return headers.combined(name)
        }
        return cookie(name, in: headers)
    }

    /// (The name is read only once there is a Cookie field: most requests to a keyed route have none.)
    private static func cookie(_ variantName: String, in headers: HeaderFields) -> String? {
        var name: String?
        for field in headers where field.name.isField("cookie") {
            if name == nil { name = Cookies.keyedCookie(variantName).map(String.init) ?? "" }
            if let value = Cookies.value(of: name!, in: field.value) { return String(value) }
        }
        return nil
    }
}
