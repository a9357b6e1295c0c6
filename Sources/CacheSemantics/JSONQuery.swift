/// The body of a POST that a route caches (`cache_post`): GraphQL or
/// JSON-RPC queries as JSON. Whether it may be cached, and its canonical
/// form (`normalize_json`: object keys sorted, whitespace removed). Fails
/// closed: only a body positively read as queries is cached (each object a
/// GraphQL document whose operations are all queries, or a JSON-RPC call of
/// a method not listed); a body not read as JSON (too deep, `NaN`, a byte
/// order mark, a lone surrogate), an object with a repeated key, a hash-only
/// persisted query (unless the route allows them) or any other JSON is
/// never cached: a write that never reaches the upstream is data lost.
/// Pure and bounded.
public enum JSONQuery {
    public static let maxDepth = 64

    indirect enum Node {
        /// Members in the order written; each key decoded (escapes read).
        case object([(key: [UInt8], value: Node)])
        case array([Node])
        /// A string, number, true, false or null: its token as written.
        case scalar(ArraySlice<UInt8>)
    }

    /// Why a body is never cached, or nil when it is read as queries only.
    /// `persistedQueries`: a request that names its query only by a hash
    /// (`extensions.persistedQuery`, no `query`) may be cached.
    public static func refusal(_ body: [UInt8], uncachedMethods: [String], persistedQueries: Bool = false) -> String? {
        var parser = Parser(bytes: body)
        guard let node = parser.document() else { return "not read as JSON" }
        if parser.repeatedKey { return "an object with a repeated key" }
        switch node {
        case .array(let items):
            guard !items.isEmpty else { return "an empty batch" }
            for item in items {
                if let why = refusal(of: item, uncachedMethods: uncachedMethods, persistedQueries: persistedQueries) { return why }
            }
            return nil
        default: return refusal(of: node, uncachedMethods: uncachedMethods, persistedQueries: persistedQueries)
        }
    }

    private static func refusal(of node: Node, uncachedMethods: [String], persistedQueries: Bool) -> String? {
        guard case .object(let members) = node else { return "JSON that is not a GraphQL or JSON-RPC request" }
        var read = false
        for (key, value) in members {
            switch key {
            case Array("query".utf8):
                guard case .scalar(let token) = value, let text = decodedString(token) else { return "a GraphQL query that is not a string" }
                if let why = GraphQLDocument.refusal(Array(text.utf8)) { return why }
                read = true
            case Array("method".utf8):
                guard case .scalar(let token) = value, let name = decodedString(token) else { return "a JSON-RPC method that is not a string" }
                if uncachedMethods.contains(name) { return "JSON-RPC method \(name)" }
                read = true
            default: continue
            }
        }
        if read { return nil }
        let persisted = members.contains { member in
            guard member.key == Array("extensions".utf8), case .object(let inner) = member.value else { return false }
            return inner.contains { $0.key == Array("persistedQuery".utf8) }
        }
        if persisted {
            return persistedQueries ? nil : "a persisted query named by its hash (cache_persisted_queries is off)"
        }
        return "JSON that is not a GraphQL or JSON-RPC request"
    }

    private static func hasRepeatedKey(_ members: [(key: [UInt8], value: Node)]) -> Bool {
        guard members.count > 1 else { return false }
        if members.count < 8 {
            for i in members.indices.dropFirst() where members[..<i].contains(where: { $0.key == members[i].key }) { return true }
            return false
        }
        var seen = Set<[UInt8]>()
        return !members.allSatisfy { seen.insert($0.key).inserted }
    }

    /// The body's JSON with every object's members sorted by key (decoded,
    /// and written again in one form) and no whitespace; nil when it is
    /// not JSON or an object repeats a key (then two bodies a last-wins and
    /// a first-wins reader take differently could share a form).
    public static func canonical(_ body: [UInt8]) -> [UInt8]? {
        var parser = Parser(bytes: body)
        guard let node = parser.document(), !parser.repeatedKey else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(body.count)
        write(node, to: &out)
        return out
    }

    private static func write(_ node: Node, to out: inout [UInt8]) {
        switch node {
        case .scalar(let token): out += token
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(item, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            // Keys are unique here (a repeated one has no canonical form).
            let sorted = members.sorted { $0.key.lexicographicallyPrecedes($1.key) }
            for (i, member) in sorted.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeString(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                write(member.value, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// A decoded string in one written form: `"` and `\\` escaped, control
    /// bytes as `\u00XX`, everything else as it is (one form per string).
    private static func writeString(_ text: [UInt8], to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for b in text {
            switch b {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), b]
            case 0..<0x20: out += Array("\\u00".utf8) + [hex[Int(b >> 4)], hex[Int(b & 15)]]
            default: out.append(b)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    // MARK: parsing

    static func parse(_ body: [UInt8]) -> Node? {
        var parser = Parser(bytes: body)
        return parser.document()
    }

    private struct Parser {
        let bytes: [UInt8]
        var i = 0
        /// Set when an object, at any depth, has a key twice (decoded).
        var repeatedKey = false

        /// The whole body as one value (nothing but white space after it).
        mutating func document() -> Node? {
            guard let node = value(depth: 0) else { return nil }
            skipSpace()
            return i == bytes.count ? node : nil
        }

        mutating func skipSpace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        }

        /// After an object's member or an array's item: true past a comma
        /// (another follows), false past `closing` (the end), nil otherwise.
        mutating func afterItem(closing: UInt8) -> Bool? {
            skipSpace()
            guard i < bytes.count else { return nil }
            let byte = bytes[i]
            guard byte == UInt8(ascii: ",") || byte == closing else { return nil }
            i += 1
            return byte == UInt8(ascii: ",")
        }

        mutating func value(depth: Int) -> Node? {
            guard depth < JSONQuery.maxDepth else { return nil }
            skipSpace()
            guard i < bytes.count else { return nil }
            switch bytes[i] {
            case UInt8(ascii: "{"):
                i += 1
                var members: [(key: [UInt8], value: Node)] = []
                skipSpace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
                while true {
                    skipSpace()
                    guard let token = string(), let key = JSONQuery.decoded(token) else { return nil }
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
                    i += 1
                    guard let item = value(depth: depth + 1) else { return nil }
                    members.append((key, item))
                    guard let more = afterItem(closing: UInt8(ascii: "}")) else { return nil }
                    if !more {
                        if !repeatedKey && JSONQuery.hasRepeatedKey(members) { repeatedKey = true }
                        return .object(members)
                    }
                }
            case UInt8(ascii: "["):
                i += 1
                var items: [Node] = []
                skipSpace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                while true {
                    guard let item = value(depth: depth + 1) else { return nil }
                    items.append(item)
                    guard let more = afterItem(closing: UInt8(ascii: "]")) else { return nil }
                    if !more { return .array(items) }
                }
            case UInt8(ascii: "\""):
                // Decoded once here so that a lone surrogate is not JSON.
                guard let token = string(), JSONQuery.decoded(token) != nil else { return nil }
                return .scalar(token)
            default:
                return literalOrNumber().map { .scalar($0) }
            }
        }

        /// A string token, quotes included; its escapes checked.
        mutating func string() -> ArraySlice<UInt8>? {
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { return nil }
            let start = i
            i += 1
            while i < bytes.count {
                let b = bytes[i]
                if b == UInt8(ascii: "\"") { i += 1; return bytes[start..<i] }
                if b < 0x20 { return nil }
                if b == UInt8(ascii: "\\") {
                    guard i + 1 < bytes.count else { return nil }
                    switch bytes[i + 1] {
                    case UInt8(ascii: "u"):
                        guard i + 5 < bytes.count, bytes[(i + 2)...(i + 5)].allSatisfy(isHex) else { return nil }
                        i += 6
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                         UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        i += 2
                    default: return nil
                    }
                    continue
                }
                i += 1
            }
            return nil
        }

        mutating func literalOrNumber() -> ArraySlice<UInt8>? {
            for word in ["true", "false", "null"] where bytes[i...].starts(with: word.utf8) {
                i += word.utf8.count
                return bytes[(i - word.utf8.count)..<i]
            }
            let start = i
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() else { return nil }
            if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
                i += 1
                guard digits() else { return nil }
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
                i += 1
                if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
                guard digits() else { return nil }
            }
            return bytes[start..<i]
        }

        mutating func digits() -> Bool {
            let start = i
            while i < bytes.count, bytes[i] >= 0x30 && bytes[i] <= 0x39 { i += 1 }
            return i > start
        }
    }

    private static func isHex(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46)
    }

    /// A string token's text (escapes decoded); nil for other tokens.
    static func decodedString(_ token: ArraySlice<UInt8>) -> String? {
        decoded(token).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A string token's bytes with its escapes decoded (UTF-8; surrogate
    /// pairs joined); other bytes as written. nil for other tokens and for a
    /// lone surrogate, which no text has (decoding it to U+FFFD would make
    /// two different keys one).
    static func decoded(_ token: ArraySlice<UInt8>) -> [UInt8]? {
        guard token.count >= 2, token.first == UInt8(ascii: "\""), token.last == UInt8(ascii: "\"") else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(token.count - 2)
        var i = token.startIndex + 1
        let end = token.endIndex - 1
        func unit(at j: Int) -> UInt32? {
            guard j + 5 < end, token[j] == UInt8(ascii: "\\"), token[j + 1] == UInt8(ascii: "u") else { return nil }
            return token[(j + 2)...(j + 5)].reduce(UInt32(0)) { $0 * 16 + UInt32(hexValue($1)) }
        }
        while i < end {
            guard token[i] == UInt8(ascii: "\\") else { out.append(token[i]); i += 1; continue }
            let escaped = token[i + 1]
            switch escaped {
            case UInt8(ascii: "u"):
                guard var code = unit(at: i) else { return nil }
                i += 6
                if code >= 0xD800 && code < 0xDC00 {
                    guard let low = unit(at: i), low >= 0xDC00 && low < 0xE000 else { return nil }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                }
                guard let scalar = Unicode.Scalar(code) else { return nil }
                out += Array(String(Character(scalar)).utf8)
                continue
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            default: out.append(escaped)
            }
            i += 2
        }
        return out
    }

    private static func hexValue(_ b: UInt8) -> UInt8 {
        b <= 0x39 ? b - 0x30 : (b | 0x20) - 0x61 + 10
    }
}
