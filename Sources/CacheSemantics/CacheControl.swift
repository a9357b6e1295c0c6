/// Parsed Cache-Control directives (RFC 9111 section 5.2), request or response.
///
/// Names are case-insensitive. A delta-seconds value that does not parse
/// makes the directive count as 0, the conservative reading (section 1.2.2);
/// values beyond 2^31 saturate there.
public struct CacheControl: Equatable, Sendable {
    public var maxAge: Int?
    public var sMaxAge: Int?
    public var noStore = false
    /// `no-cache` without field names: every reuse needs validation.
    public var noCache = false
    /// `no-cache="a, b"`: those fields must not be reused without validation
    /// (section 5.2.2.4); Larder does not store them, and reuses the rest.
    public var noCacheFields: [String] = []
    /// `private` without field names: the whole response is for one user.
    public var isPrivate = false
    /// `private="a, b"`: only those fields are private (a shared cache may
    /// store the response without them).
    public var privateFields: [String] = []
    /// `must-understand`: store only if the status code is understood, and
    /// then ignore `no-store`.
    public var mustUnderstand = false
    public var isPublic = false
    public var mustRevalidate = false
    public var proxyRevalidate = false
    public var noTransform = false
    public var immutable = false
    public var onlyIfCached = false
    /// Request `max-stale`: nil absent, Int.max when given without a value.
    public var maxStale: Int?
    public var minFresh: Int?
    public var staleWhileRevalidate: Int?
    public var staleIfError: Int?

    public init() {}

    /// Parses one or more comma-joined Cache-Control field values.
    public init(_ value: String?) {
        guard let value, !value.isEmpty else { return }
        var rest = Substring(value)
        while !rest.isEmpty {
            let (name, argument, remainder) = Self.nextDirective(&rest)
            rest = remainder
            apply(name.lowercased(), argument)
        }
    }

    private mutating func apply(_ name: String, _ argument: Substring?) {
        switch name {
        case "max-age": if maxAge == nil { maxAge = Self.seconds(argument) }
        case "s-maxage": if sMaxAge == nil { sMaxAge = Self.seconds(argument) }
        case "no-store": noStore = true
        case "no-cache":
            if let argument, !argument.isEmpty {
                noCacheFields += Self.fieldNames(argument)
            } else {
                noCache = true
            }
        case "private":
            if let argument, !argument.isEmpty {
                privateFields += Self.fieldNames(argument)
            } else {
                isPrivate = true
            }
        case "must-understand": mustUnderstand = true
        case "public": isPublic = true
        case "must-revalidate": mustRevalidate = true
        case "proxy-revalidate": proxyRevalidate = true
        case "no-transform": noTransform = true
        case "immutable": immutable = true
        case "only-if-cached": onlyIfCached = true
        case "max-stale": maxStale = argument == nil ? Int.max : Self.seconds(argument)
        case "min-fresh": minFresh = Self.seconds(argument)
        case "stale-while-revalidate": staleWhileRevalidate = Self.seconds(argument)
        case "stale-if-error": staleIfError = Self.seconds(argument)
        default: break  // unknown directives are ignored (section 5.2.3)
        }
    }

    /// The lowercased field names of a quoted list argument.
    static func fieldNames(_ argument: Substring) -> [String] {
        argument.split(separator: ",").map { $0.trimmingWhitespace().lowercased() }.filter { !$0.isEmpty }
    }

    /// delta-seconds: digits only; anything else reads as 0.
    static func seconds(_ argument: Substring?) -> Int {
        guard let argument, !argument.isEmpty else { return 0 }
        var value = 0
        for c in argument.utf8 {
            guard c >= 0x30 && c <= 0x39 else { return 0 }
            value = value * 10 + Int(c - 0x30)
            if value >= 2_147_483_648 { return 2_147_483_648 }
        }
        return value
    }

    /// Splits off one directive: name, optional argument (unquoted), rest.
    private static func nextDirective(_ s: inout Substring) -> (Substring, Substring?, Substring) {
        var i = s.startIndex
        func skipSpace() { while i < s.endIndex, s[i] == " " || s[i] == "\t" || s[i] == "," { i = s.index(after: i) } }
        skipSpace()
        let nameStart = i
        while i < s.endIndex, s[i] != "=", s[i] != ",", s[i] != " ", s[i] != "\t" { i = s.index(after: i) }
        let name = s[nameStart..<i]
        var argument: Substring?
        // The grammar allows no whitespace around "=": "max-age = 5" is
        // malformed, and a malformed max-age reads as 0 (stale), the safe side.
        if i < s.endIndex, s[i] == "=" {
            i = s.index(after: i)
            if i < s.endIndex, s[i] == "\"" {
                i = s.index(after: i)
                let argStart = i
                while i < s.endIndex, s[i] != "\"" {
                    if s[i] == "\\" { i = s.index(after: i); if i == s.endIndex { break } }
                    i = s.index(after: i)
                }
                argument = s[argStart..<i]
                if i < s.endIndex { i = s.index(after: i) }
            } else {
                let argStart = i
                while i < s.endIndex, s[i] != ",", s[i] != " ", s[i] != "\t" { i = s.index(after: i) }
                argument = s[argStart..<i]
            }
        }
        // Skip to the next comma.
        while i < s.endIndex, s[i] != "," { i = s.index(after: i) }
        return (name, argument, s[i...])
    }
}
