/// What content codings a client accepts (RFC 9110 section 12.5.3), and
/// the one normalised value Larder keys `Vary: Accept-Encoding` variants
/// by, so that every browser's, curl's and a library's header do not each
/// make a copy: `br` when the client takes brotli at least as gladly as
/// gzip, else `gzip`. Clients that do not accept gzip share the `gzip`
/// variant: Larder decodes a gzip body for them (`ClientCoding`). The
/// upstream is asked with the matching value (`upstreamValue`), so what
/// comes back suits every client of the variant.
public struct AcceptEncoding: Sendable {
    private var qualities: [(coding: String, q: Double)] = []
    private var star: Double?
    private let present: Bool

    /// `value`: the request's combined Accept-Encoding, nil when it has none.
    public init(_ value: String?) {
        present = value != nil
        guard let value else { return }
        for member in value.split(separator: ",") {
            let parts = member.split(separator: ";")
            guard let first = parts.first else { continue }
            var coding = first.trimmingWhitespace().lowercased()
            guard !coding.isEmpty else { continue }
            if coding == "x-gzip" { coding = "gzip" }  // section 8.4.1.3
            var q = 1.0
            for parameter in parts.dropFirst() {
                let p = parameter.trimmingWhitespace().lowercased()
                if p.hasPrefix("q=") { q = Vary.qValue(p.dropFirst(2)) ?? 0 }
            }
            if coding == "*" { star = q } else { qualities.append((coding, q)) }
        }
    }

    /// How gladly the client takes `coding` (lowercased): 0 is not at all.
    /// Without the field only identity is taken: a client that sends none
    /// (curl, most libraries) cannot decode anything, whatever RFC 9110
    /// allows the server to assume.
    public func quality(_ coding: String) -> Double {
        if let listed = qualities.first(where: { $0.coding == coding }) { return listed.q }
        if coding == "identity" { return star == 0 ? 0 : 1 }  // acceptable unless excluded
        return present ? star ?? 0 : 0
    }

    public func accepts(_ coding: String) -> Bool { quality(coding) > 0 }

    /// Whether a client with this field takes gzip: `accepts("gzip")`,
    /// answered from the field's bytes, with no list built, when it has no
    /// parameters (the usual "gzip, deflate, br": every coding at q=1). A
    /// hit on a stored gzip body asks this of every client.
    public static func takesGzip(_ value: String?) -> Bool {
        guard let value else { return false }
        if let fast = value.utf8.withContiguousStorageIfAvailable(takesGzipWithoutParameters), let answer = fast {
            return answer
        }
        return AcceptEncoding(value).accepts("gzip")
    }

    /// nil when a member has parameters (q-values decide then).
    private static func takesGzipWithoutParameters(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool? {
        var found = false
        var start = 0
        while start <= bytes.count {
            var end = start
            while end < bytes.count && bytes[end] != UInt8(ascii: ",") {
                if bytes[end] == UInt8(ascii: ";") { return nil }
                end += 1
            }
            var a = start, b = end
            while a < b && (bytes[a] == 0x20 || bytes[a] == 0x09) { a += 1 }
            while b > a && (bytes[b - 1] == 0x20 || bytes[b - 1] == 0x09) { b -= 1 }
            if matches(bytes, a, b, "gzip") || matches(bytes, a, b, "x-gzip") || (b - a == 1 && bytes[a] == UInt8(ascii: "*")) {
                found = true
            }
            start = end + 1
        }
        return found
    }

    private static func matches(_ bytes: UnsafeBufferPointer<UInt8>, _ a: Int, _ b: Int, _ word: StaticString) -> Bool {
        guard b - a == word.utf8CodeUnitCount else { return false }
        for i in 0..<(b - a) where bytes[a + i] | 0x20 != word.utf8Start[i] { return false }
        return true
    }

    /// The variant key (see the type's note).
    public var variantKey: String {
        let br = quality("br")
        return br > 0 && br >= quality("gzip") ? "br" : "gzip"
    }

    /// What the upstream is asked for on the client's behalf: the codings
    /// of its variant the client takes, or identity.
    public var upstreamValue: String {
        let gzip = accepts("gzip")
        if variantKey == "br" { return gzip ? "br, gzip" : "br" }
        return gzip ? "gzip" : "identity"
    }

    /// Whether a body in `contentEncoding` (the response's field, nil for
    /// none) may go to this client as it is: every coding listed accepted.
    public func takes(contentEncoding: String?) -> Bool {
        guard let contentEncoding else { return true }
        for member in contentEncoding.split(separator: ",") {
            let coding = member.trimmingWhitespace().lowercased()
            if coding.isEmpty || coding == "identity" { continue }
            if !accepts(coding == "x-gzip" ? "gzip" : coding) { return false }
        }
        return true
    }

    /// Whether a client with this field takes a body in `coding` (gzip
    /// answered without a list built where it can be: `takesGzip`).
    @inline(__always)
    public static func takes(_ coding: StoredCoding, _ value: String?) -> Bool {
        switch coding {
        case .none: return true
        case .gzip: return takesGzip(value)
        case .zstd, .br: return AcceptEncoding(value).accepts(coding.token)
        }
    }
}
