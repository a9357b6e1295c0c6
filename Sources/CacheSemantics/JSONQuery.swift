/// The body of a POST that a route caches (`cache_post`): GraphQL or
/// JSON-RPC queries as JSON. Whether it may be cached at all (a GraphQL
/// mutation or subscription, or a JSON-RPC method the route names, never
/// is) and its canonical form (`normalize_json`: object keys sorted,
/// whitespace removed). Pure and bounded: a body nested deeper than
/// `maxDepth` is not read as JSON.
public enum JSONQuery {
    public static let maxDepth = 64

    indirect enum Node {
        /// Members in the order written; each key as its token (quotes and escapes as written).
        case object([(key: ArraySlice<UInt8>, value: Node)])
        case array([Node])
        /// A string, number, true, false or null: its token as written.
        case scalar(ArraySlice<UInt8>)
    }

    /// Why a body is never cached, or nil when it may be.
    public static func refusal(_ body: [UInt8], uncachedMethods: [String]) -> String? {
        guard let node = parse(body) else { return nil }  // not JSON: cached by its bytes
        switch node {
        case .array(let items): return items.lazy.compactMap { refusal(of: $0, uncachedMethods: uncachedMethods) }.first
        default: return refusal(of: node, uncachedMethods: uncachedMethods)
        }
    }

    private static func refusal(of node: Node, uncachedMethods: [String]) -> String? {
        guard case .object(let members) = node else { return nil }
        for (key, value) in members {
            guard case .scalar(let token) = value, let text = decodedString(token) else { continue }
            switch decodedString(key) {
            case "query":
                if let operation = GraphQLDocument.writingOperation(text) { return "a GraphQL \(operation)" }
            case "method":
                if uncachedMethods.contains(text) { return "JSON-RPC method \(text)" }
            default: continue
            }
        }
        return nil
    }

    /// The body's JSON with every object's members sorted by key (as
    /// written) and no whitespace; nil when it is not JSON.
    public static func canonical(_ body: [UInt8]) -> [UInt8]? {
        guard let node = parse(body) else { return nil }
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
            let sorted = members.enumerated().sorted { a, b in
                a.element.key.lexicographicallyPrecedes(b.element.key) || (a.element.key.elementsEqual(b.element.key) && a.offset < b.offset)
            }
            for (i, member) in sorted.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                out += member.element.key
                out.append(UInt8(ascii: ":"))
                write(member.element.value, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    // MARK: parsing

    static func parse(_ body: [UInt8]) -> Node? {
        var parser = Parser(bytes: body)
        guard let node = parser.value(depth: 0) else { return nil }
        parser.skipSpace()
        return parser.i == body.count ? node : nil
    }

    private struct Parser {
        let bytes: [UInt8]
        var i = 0

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
                var members: [(key: ArraySlice<UInt8>, value: Node)] = []
                skipSpace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
                while true {
                    skipSpace()
                    guard let key = string() else { return nil }
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
                    i += 1
                    guard let item = value(depth: depth + 1) else { return nil }
                    members.append((key, item))
                    guard let more = afterItem(closing: UInt8(ascii: "}")) else { return nil }
                    if !more { return .object(members) }
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
                return string().map { .scalar($0) }
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
        guard token.count >= 2, token.first == UInt8(ascii: "\""), token.last == UInt8(ascii: "\"") else { return nil }
        var out: [UInt8] = []
        var i = token.startIndex + 1
        let end = token.endIndex - 1
        while i < end {
            guard token[i] == UInt8(ascii: "\\") else { out.append(token[i]); i += 1; continue }
            let escaped = token[i + 1]
            switch escaped {
            case UInt8(ascii: "u"):
                let code = token[(i + 2)...(i + 5)].reduce(UInt32(0)) { $0 * 16 + UInt32(hexValue($1)) }
                out += Array(String(Unicode.Scalar(code).map(Character.init) ?? "\u{FFFD}").utf8)
                i += 6
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
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ b: UInt8) -> UInt8 {
        b <= 0x39 ? b - 0x30 : (b | 0x20) - 0x61 + 10
    }
}

/// The operations a GraphQL document defines, read only as far as telling
/// queries from writes: an operation keyword at the top level (outside
/// braces, strings and comments).
enum GraphQLDocument {
    /// "mutation" or "subscription" when the document defines one (then it
    /// is never cached, whichever operation a request names); nil otherwise.
    static func writingOperation(_ document: String) -> String? {
        let b = Array(document.utf8)
        var i = 0, depth = 0
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "#") {
                while i < b.count, b[i] != 0x0A, b[i] != 0x0D { i += 1 }
            } else if c == UInt8(ascii: "\"") {
                let block = b[i...].starts(with: "\"\"\"".utf8)
                i += block ? 3 : 1
                while i < b.count {
                    if b[i] == UInt8(ascii: "\\") { i += 2; continue }
                    if block ? b[i...].starts(with: "\"\"\"".utf8) : b[i] == UInt8(ascii: "\"") { i += block ? 3 : 1; break }
                    i += 1
                }
                continue
            } else if c == UInt8(ascii: "{") || c == UInt8(ascii: "(") || c == UInt8(ascii: "[") {
                depth += 1
            } else if c == UInt8(ascii: "}") || c == UInt8(ascii: ")") || c == UInt8(ascii: "]") {
                depth = max(0, depth - 1)
            } else if depth == 0, isNameStart(c), i == 0 || !isNameByte(b[i - 1]) {
                var end = i
                while end < b.count, isNameByte(b[end]) { end += 1 }
                let word = String(decoding: b[i..<end], as: UTF8.self)
                if word == "mutation" || word == "subscription" { return word }
                i = end
                continue
            }
            i += 1
        }
        return nil
    }

    private static func isNameStart(_ c: UInt8) -> Bool {
        (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || c == UInt8(ascii: "_")
    }

    private static func isNameByte(_ c: UInt8) -> Bool { isNameStart(c) || (c >= 0x30 && c <= 0x39) }
}
