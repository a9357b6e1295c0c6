/// A `Content-Type` value as a cache key reads it (RFC 9110 section 8.3):
/// type, subtype and parameter names are case-insensitive, whitespace
/// around the parts carries no meaning; parameter values are kept as sent
/// (a quoted one may differ in case), except `charset`'s (case-insensitive).
public enum MediaType {
    /// "Application/JSON ; Charset=UTF-8" -> "application/json;charset=utf-8".
    public static func normalized(_ value: String) -> String {
        // The usual value ("application/json") is already normal: returned
        // as it is, after one pass over its bytes.
        if value.utf8.allSatisfy(isPlainByte) { return value }
        var parts = value.split(separator: ";").map { $0.trimmingWhitespace() }
        guard !parts.isEmpty else { return "" }
        var out = parts.removeFirst().lowercased()
        for parameter in parts where !parameter.isEmpty {
            guard let equals = parameter.firstIndex(of: "=") else { out += ";" + parameter.lowercased(); continue }
            let name = parameter[..<equals].trimmingWhitespace().lowercased()
            var value = parameter[parameter.index(after: equals)...].trimmingWhitespace()
            if name == "charset" { value = value.lowercased() }
            out += ";" + name + "=" + value
        }
        return out
    }

    /// Whether a normalized type is JSON: `application/json` or any `+json`
    /// structured syntax suffix (RFC 6839).
    public static func isJSON(_ normalized: String) -> Bool {
        if normalized == "application/json" { return true }  // (the usual one, without a scan)
        let type = normalized.utf8.prefix { $0 != UInt8(ascii: ";") }
        if type.elementsEqual("application/json".utf8) { return true }
        return type.count > 5 && type.suffix(5).elementsEqual("+json".utf8) && type.contains(UInt8(ascii: "/"))
    }

    /// A token byte (RFC 9110 section 5.6.2) that is not an upper-case
    /// letter, or "/": a value of only these needs no normalizing.
    @inline(__always)
    private static func isPlainByte(_ b: UInt8) -> Bool {
        (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == UInt8(ascii: "/") || b == UInt8(ascii: "-")
            || b == UInt8(ascii: "+") || b == UInt8(ascii: ".") || b == UInt8(ascii: "_")
    }
}
