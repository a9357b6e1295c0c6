/// A `Content-Type` value as a cache key reads it (RFC 9110 section 8.3):
/// type, subtype and parameter names are case-insensitive, whitespace
/// around the parts carries no meaning; parameter values are kept as sent
/// (a quoted one may differ in case), except `charset`'s (case-insensitive).
public enum MediaType {
    /// "Application/JSON ; Charset=UTF-8" -> "application/json;charset=utf-8".
    public static func normalized(_ value: String) -> String {
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
        let type = normalized.prefix { $0 != ";" }
        return type == "application/json" || (type.hasSuffix("+json") && type.contains("/"))
    }
}
