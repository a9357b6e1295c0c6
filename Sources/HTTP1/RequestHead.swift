import HTTPHeaders

/// How a message body is delimited (RFC 9112 section 6.3).
public enum BodyFraming: Equatable, Sendable {
    case none
    case contentLength(Int)
    case chunked
}

/// A parsed request line and header section.
public struct RequestHead: Equatable, Sendable {
    public var method: String
    /// The target as the client sent it (origin-form, absolute-form or "*"),
    /// with dot segments removed from its path (`DotSegments`).
    public var target: String
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    public var minorVersion: Int
    public var headers: HeaderFields
    public var framing: BodyFraming
    /// Whether the client asked for `100 Continue` before sending the body.
    public var expectsContinue: Bool
    /// Whether the connection stays open after this exchange.
    public var keepAlive: Bool

    /// The first value of a header (name in lower case).
    public func header(_ lowercasedName: String) -> String? { headers[lowercasedName] }

    /// All values of a header, comma-joined as RFC 9110 section 5.3 allows.
    public func combinedHeader(_ lowercasedName: String) -> String? { headers.combined(lowercasedName) }

    /// The path and query to send upstream: origin-form as is, the path of
    /// an absolute-form target, "*" for OPTIONS *.
    public var pathAndQuery: String {
        if target.utf8.first == UInt8(ascii: "/") || target == "*" { return target }  // (utf8: `first` makes a Character)
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
