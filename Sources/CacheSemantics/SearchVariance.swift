import HTTPHeaders

/// No-Vary-Search (draft-ietf-httpbis-no-vary-search-04): which of a URL's
/// query parameters a stored response does not vary on, and whether their
/// order counts. Two queries answer for each other under a variance
/// exactly when their canonical forms (`canonicalQuery`) are equal, so a
/// response can be found by its canonical form (one key, no scan).
public struct SearchVariance: Equatable, Sendable {
    public enum Params: Equatable, Sendable {
        /// Every parameter counts (the default).
        case all
        /// These do not count, every other does (`params=("a" "b")`).
        case allBut([[UInt8]])
        /// Only these count (`params` alone: none; `params, except=("a")`).
        case only([[UInt8]])
    }

    public var params: Params
    /// Whether the parameters' order counts (false with `key-order`).
    public var varyOnKeyOrder: Bool

    /// What a response without the field (or with an invalid one) has:
    /// every parameter, in order, counts (section 4, "default URL search variance").
    public static let standard = SearchVariance(params: .all, varyOnKeyOrder: true)

    public init(params: Params, varyOnKeyOrder: Bool) {
        (self.params, self.varyOnKeyOrder) = (params, varyOnKeyOrder)
    }

    public var isStandard: Bool { self == .standard }

    /// The field's value as section 4 parses it. Absent, not a structured
    /// dictionary, with a key other than the three, a member of the wrong
    /// type, or `except` without `params` being true: the default (the
    /// response then varies on its whole query, as without the field).
    public init(field: String?) {
        self = .standard
        guard let field, let members = StructuredDictionary.parse(field) else { return }
        var values: [String: StructuredDictionary.Item] = [:]
        for (key, item) in members {
            guard key == "key-order" || key == "params" || key == "except" else { return }
            values[key] = item
        }
        var result = SearchVariance.standard
        if let order = values["key-order"] {
            guard case .boolean(let ignored) = order else { return }
            result.varyOnKeyOrder = !ignored
        }
        switch values["params"] {
        case nil, .boolean(false): break
        case .boolean(true): result.params = .only([])
        case .innerList(let items):
            guard let names = Self.names(items) else { return }
            result.params = .allBut(names)
        default: return
        }
        if let except = values["except"] {
            guard values["params"] == .boolean(true), case .innerList(let items) = except, let names = Self.names(items) else { return }
            result.params = .only(names)
        }
        self = result
    }

    /// An inner list's strings as parameter names (each decoded as a query's
    /// names are); nil when an item is not a string.
    private static func names(_ items: [StructuredDictionary.Item]) -> [[UInt8]]? {
        var names: [[UInt8]] = []
        for item in items {
            guard case .string(let text) = item else { return nil }
            names.append(decoded(text.utf8))
        }
        return names
    }

    /// The query's parameters that count under this variance, decoded, in a
    /// canonical order when theirs does not count, and written out again
    /// (percent-encoded but for unreserved bytes): equal for two queries
    /// exactly when one's response may answer the other (section 5).
    public func canonicalQuery(_ query: Substring) -> String {
        var pairs = Self.pairs(query)
        switch params {
        case .all: break
        case .allBut(let names): pairs.removeAll { names.contains($0.name) }
        case .only(let names): pairs.removeAll { !names.contains($0.name) }
        }
        // A stable sort by name: values of one name keep their order (it counts).
        if !varyOnKeyOrder {
            pairs = pairs.enumerated().sorted { a, b in
                a.element.name == b.element.name ? a.offset < b.offset : a.element.name.lexicographicallyPrecedes(b.element.name)
            }.map(\.element)
        }
        var out: [UInt8] = []
        for (i, pair) in pairs.enumerated() {
            if i > 0 { out.append(UInt8(ascii: "&")) }
            Self.encode(pair.name, to: &out)
            out.append(UInt8(ascii: "="))
            Self.encode(pair.value, to: &out)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether a response for one query may answer the other under this variance.
    public func equivalent(_ a: Substring, _ b: Substring) -> Bool { canonicalQuery(a) == canonicalQuery(b) }

    /// A query as `application/x-www-form-urlencoded` reads it: split at
    /// "&" (empty pieces skipped), then at the first "=", "+" read as a
    /// space and percent escapes decoded. (Compared as bytes: two invalid
    /// UTF-8 sequences stay different, the safe side.)
    static func pairs(_ query: Substring) -> [(name: [UInt8], value: [UInt8])] {
        var pairs: [(name: [UInt8], value: [UInt8])] = []
        for piece in query.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            if let equals = piece.firstIndex(of: UInt8(ascii: "=")) {
                pairs.append((decoded(piece[..<equals]), decoded(piece[piece.index(after: equals)...])))
            } else {
                pairs.append((decoded(piece), []))
            }
        }
        return pairs
    }

    static func decoded<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> [UInt8] { PercentDecoding.decode(bytes, plusIsSpace: true) }

    private static func encode(_ bytes: [UInt8], to out: inout [UInt8]) {
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in bytes {
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            }
        }
    }
}
