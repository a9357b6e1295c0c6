/// How a message body is delimited (RFC 9112 section 6.3).
public enum BodyFraming: Equatable, Sendable {
    case none
    case contentLength(Int)
    case chunked
}

/// A header field as received; `name` is lowercased once at parse time so
/// lookups compare bytes, not case-folded strings.
public struct HeaderField: Equatable, Sendable {
    public var name: String
    public var value: String
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// A parsed request line and header section.
public struct RequestHead: Equatable, Sendable {
    public var method: String
    /// The target as the client sent it (origin-form, absolute-form or "*"),
    /// with dot segments removed from its path (`DotSegments`).
    public var target: String
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    public var minorVersion: Int
    public var headers: [HeaderField]
    public var framing: BodyFraming
    /// Whether the client asked for `100 Continue` before sending the body.
    public var expectsContinue: Bool
    /// Whether the connection stays open after this exchange.
    public var keepAlive: Bool

    /// The first value of a header (name in lower case).
    public func header(_ lowercasedName: String) -> String? {
        for field in headers where field.name.isField(lowercasedName) { return field.value }
        return nil
    }

    /// All values of a header, comma-joined as RFC 9110 section 5.3 allows.
    public func combinedHeader(_ lowercasedName: String) -> String? {
        Self.combined(lowercasedName, in: headers)
    }

    /// The same over a field list (a closure that captures only the list
    /// needs no allocated context).
    public static func combined(_ lowercasedName: String, in headers: [HeaderField]) -> String? {
        var result: String?
        for field in headers where field.name.isField(lowercasedName) {
            result = result.map { $0 + ", " + field.value } ?? field.value
        }
        return result
    }

    /// The path and query to send upstream: origin-form as is, the path of
    /// an absolute-form target, "*" for OPTIONS *.
    public var pathAndQuery: String {
        if target.first == "/" || target == "*" { return target }
        // absolute-form: scheme "://" authority path-abempty [ "?" query ]
        let afterScheme: Substring
        if target.hasPrefix("http://") { afterScheme = target.dropFirst(7) }
        else if target.hasPrefix("https://") { afterScheme = target.dropFirst(8) }
        else { return target }
        let rest = afterScheme
        if let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) {
            let path = String(rest[slash...])
            return path.first == "?" ? "/" + path : path
        }
        return "/"
    }
}
