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
    public var noCacheFields: [String] {
        get { named?.noCache ?? [] }
        set { named = NamedFields.make(noCache: newValue, private: privateFields) }
    }
    /// `private` without field names: the whole response is for one user.
    public var isPrivate = false
    /// `private="a, b"`: only those fields are private (a shared cache may
    /// store the response without them).
    public var privateFields: [String] {
        get { named?.private ?? [] }
        set { named = NamedFields.make(noCache: noCacheFields, private: newValue) }
    }
    /// Both lists behind one optional reference, nil in nearly every value:
    /// a copy (every request's and every hit's directives are copied a few
    /// times) then retains nothing.
    private var named: NamedFields? = nil
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

    final class NamedFields: Equatable, Sendable {
        let noCache: [String]
        let `private`: [String]

        private init(noCache: [String], private: [String]) {
            self.noCache = noCache
            self.private = `private`
        }

        static func make(noCache: [String], private: [String]) -> NamedFields? {
            noCache.isEmpty && `private`.isEmpty ? nil : NamedFields(noCache: noCache, private: `private`)
        }

        static func == (a: NamedFields, b: NamedFields) -> Bool { a.noCache == b.noCache && a.private == b.private }
    }

    /// Parses one or more comma-joined Cache-Control field values.
    /// Works on the UTF-8 bytes (every delimiter is ASCII): this runs for
    /// every response and most requests.
    public init(_ value: String?) {
        guard var value, !value.isEmpty else { return }
        value.withUTF8 { bytes in
            var i = 0
            while i < bytes.count {
                let (name, argument, next) = Self.nextDirective(bytes, from: i)
                i = next
                apply(name, argument)
            }
        }
    }

    private typealias Bytes = UnsafeBufferPointer<UInt8>

    private mutating func apply(_ name: Bytes, _ argument: Bytes?) {
        func named(_ directive: StaticString) -> Bool {
            guard name.count == directive.utf8CodeUnitCount else { return false }
            let d = directive.utf8Start
            for k in 0..<name.count where name[k] | (name[k] >= 0x41 && name[k] <= 0x5A ? 0x20 : 0) != d[k] { return false }
            return true
        }
        switch name.count {
        case 6: if named("public") { isPublic = true }
        case 7:
            if named("max-age") { if maxAge == nil { maxAge = Self.seconds(argument) } }
            else if named("private") {
                if let argument, !argument.isEmpty { privateFields += Self.fieldNames(argument) } else { isPrivate = true }
            }
        case 8:
            if named("no-store") { noStore = true }
            else if named("s-maxage") { if sMaxAge == nil { sMaxAge = Self.seconds(argument) } }
            else if named("no-cache") {
                if let argument, !argument.isEmpty { noCacheFields += Self.fieldNames(argument) } else { noCache = true }
            }
        case 9:
            if named("immutable") { immutable = true }
            else if named("max-stale") { maxStale = argument == nil ? Int.max : Self.seconds(argument) }
            else if named("min-fresh") { minFresh = Self.seconds(argument) }
        case 12: if named("no-transform") { noTransform = true }
        case 14:
            if named("only-if-cached") { onlyIfCached = true }
            else if named("stale-if-error") { staleIfError = Self.seconds(argument) }
        case 15:
            if named("must-revalidate") { mustRevalidate = true }
            else if named("must-understand") { mustUnderstand = true }
        case 16: if named("proxy-revalidate") { proxyRevalidate = true }
        case 22: if named("stale-while-revalidate") { staleWhileRevalidate = Self.seconds(argument) }
        default: break  // unknown directives are ignored (section 5.2.3)
        }
    }

    /// The lowercased field names of a quoted list argument.
    private static func fieldNames(_ argument: Bytes) -> [String] {
        fieldNames(Substring(String(decoding: argument, as: UTF8.self)))
    }

    static func fieldNames(_ argument: Substring) -> [String] {
        argument.split(separator: ",").map { $0.trimmingWhitespace().lowercased() }.filter { !$0.isEmpty }
    }

    /// delta-seconds: digits only; anything else reads as 0.
    static func seconds(_ argument: Substring?) -> Int {
        guard var argument else { return 0 }
        return argument.withUTF8 { seconds($0) }
    }

    private static func seconds(_ argument: Bytes?) -> Int {
        guard let argument, !argument.isEmpty else { return 0 }
        var value = 0
        for c in argument {
            guard c >= 0x30 && c <= 0x39 else { return 0 }
            value = value * 10 + Int(c - 0x30)
            if value >= 2_147_483_648 { return 2_147_483_648 }
        }
        return value
    }

    /// Splits off the directive at `start`: name, optional argument
    /// (unquoted), and where the next one starts (at its comma).
    private static func nextDirective(_ bytes: Bytes, from start: Int) -> (Bytes, Bytes?, Int) {
        var i = start
        let end = bytes.count
        while i < end, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x2C { i += 1 }
        let nameStart = i
        while i < end, bytes[i] != 0x3D, bytes[i] != 0x2C, bytes[i] != 0x20, bytes[i] != 0x09 { i += 1 }
        let name = Bytes(rebasing: bytes[nameStart..<i])
        var argument: Bytes?
        // The grammar allows no whitespace around "=": "max-age = 5" is
        // malformed, and a malformed max-age reads as 0 (stale), the safe side.
        if i < end, bytes[i] == 0x3D {
            i += 1
            if i < end, bytes[i] == 0x22 {
                i += 1
                let argStart = i
                while i < end, bytes[i] != 0x22 {
                    if bytes[i] == 0x5C { i += 1; if i == end { break } }
                    i += 1
                }
                argument = Bytes(rebasing: bytes[argStart..<min(i, end)])
                if i < end { i += 1 }
            } else {
                let argStart = i
                while i < end, bytes[i] != 0x2C, bytes[i] != 0x20, bytes[i] != 0x09 { i += 1 }
                argument = Bytes(rebasing: bytes[argStart..<i])
            }
        }
        // Skip to the next comma.
        while i < end, bytes[i] != 0x2C { i += 1 }
        return (name, argument, i)
    }
}
