/// Targeted cache-control fields (RFC 9213) are Structured Field
/// Dictionaries (RFC 8941), parsed strictly: a field that does not parse is
/// ignored as a whole, and a directive with a value of the wrong type is
/// ignored alone (RFC 9213 section 2.1).
extension CacheControl {
    /// nil when `value` is not a valid dictionary (the field is then ignored).
    public init?(targeted value: String) {
        guard let members = StructuredDictionary.parse(value) else { return nil }
        self.init()
        for (key, item) in members {
            switch (key, item) {
            case ("max-age", .integer(let n)) where n >= 0: if maxAge == nil { maxAge = Int(min(n, 2_147_483_648)) }
            case ("s-maxage", .integer(let n)) where n >= 0: if sMaxAge == nil { sMaxAge = Int(min(n, 2_147_483_648)) }
            case ("stale-while-revalidate", .integer(let n)) where n >= 0: staleWhileRevalidate = Int(min(n, 2_147_483_648))
            case ("stale-if-error", .integer(let n)) where n >= 0: staleIfError = Int(min(n, 2_147_483_648))
            case ("no-store", .boolean(true)): noStore = true
            case ("no-cache", .boolean(true)): noCache = true
            case ("private", .boolean(true)): isPrivate = true
            case ("public", .boolean(true)): isPublic = true
            case ("must-revalidate", .boolean(true)): mustRevalidate = true
            case ("proxy-revalidate", .boolean(true)): proxyRevalidate = true
            case ("must-understand", .boolean(true)): mustUnderstand = true
            case ("no-transform", .boolean(true)): noTransform = true
            case ("immutable", .boolean(true)): immutable = true
            default: continue  // unknown, or the wrong type: ignored
            }
        }
    }
}

/// The subset of RFC 8941 needed here: a dictionary whose member values are
/// bare items or inner lists of them (parameters are parsed and dropped;
/// only integers, booleans and strings keep their values).
enum StructuredDictionary {
    indirect enum Item: Equatable {
        case integer(Int64), decimal, string(String), token, bytes, boolean(Bool), innerList([Item])
    }

    static func parse(_ text: String) -> [(String, Item)]? {
        var p = Parser(Array(text.utf8))
        p.skip(space: true)
        var members: [(String, Item)] = []
        if p.atEnd { return nil }  // empty: ignored like an invalid field
        while true {
            guard let key = p.key() else { return nil }
            var item = Item.boolean(true)
            if p.peek == UInt8(ascii: "=") {
                p.advance()
                if p.peek == UInt8(ascii: "(") {
                    guard let items = p.innerList() else { return nil }
                    item = .innerList(items)
                } else {
                    guard let bare = p.bareItem() else { return nil }
                    item = bare
                }
            }
            guard p.parameters() else { return nil }
            members.removeAll { $0.0 == key }  // the last duplicate wins (RFC 8941 section 4.2.2)
            members.append((key, item))
            guard let end = p.afterMember() else { return nil }
            if end { return members }
        }
    }

    private struct Parser {
        let b: [UInt8]
        var i = 0
        init(_ b: [UInt8]) { self.b = b }
        var atEnd: Bool { i >= b.count }
        var peek: UInt8? { i < b.count ? b[i] : nil }
        mutating func advance() { i += 1 }

        mutating func skip(space onlySpace: Bool) {
            while let c = peek, c == 0x20 || (!onlySpace && c == 0x09) { i += 1 }
        }

        /// After a member of a dictionary or list: true at the end, false
        /// before the next member, nil for neither (a missing or trailing comma).
        mutating func afterMember() -> Bool? {
            skip(space: false)
            if atEnd { return true }
            guard peek == UInt8(ascii: ",") else { return nil }
            advance()
            skip(space: false)
            return atEnd ? nil : false
        }

        mutating func key() -> String? {
            guard let c = peek, (c >= 0x61 && c <= 0x7A) || c == UInt8(ascii: "*") else { return nil }
            let start = i
            while let c = peek, (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x5F || c == 0x2D || c == 0x2E || c == 0x2A {
                i += 1
            }
            return String(decoding: b[start..<i], as: UTF8.self)
        }

        mutating func bareItem() -> Item? {
            guard let c = peek else { return nil }
            switch c {
            case UInt8(ascii: "-"), 0x30...0x39: return number()
            case UInt8(ascii: "\""):
                i += 1
                var text: [UInt8] = []
                while let d = peek {
                    i += 1
                    if d == UInt8(ascii: "\\") {
                        guard let e = peek, e == UInt8(ascii: "\"") || e == UInt8(ascii: "\\") else { return nil }
                        text.append(e)
                        i += 1
                    } else if d == UInt8(ascii: "\"") {
                        return .string(String(decoding: text, as: UTF8.self))
                    } else if d < 0x20 || d > 0x7E {
                        return nil
                    } else {
                        text.append(d)
                    }
                }
                return nil
            case UInt8(ascii: ":"):
                i += 1
                while let d = peek, d != UInt8(ascii: ":") {
                    guard (d >= 0x41 && d <= 0x5A) || (d >= 0x61 && d <= 0x7A) || (d >= 0x30 && d <= 0x39)
                        || d == UInt8(ascii: "+") || d == UInt8(ascii: "/") || d == UInt8(ascii: "=") else { return nil }
                    i += 1
                }
                guard peek == UInt8(ascii: ":") else { return nil }
                i += 1
                return .bytes
            case UInt8(ascii: "?"):
                i += 1
                guard let d = peek, d == 0x30 || d == 0x31 else { return nil }
                i += 1
                return .boolean(d == 0x31)
            case UInt8(ascii: "*"), 0x41...0x5A, 0x61...0x7A:
                i += 1
                while let d = peek, d > 0x20, d < 0x7F, !"\"(),;<=>?@[\\]{}".utf8.contains(d) { i += 1 }
                return .token
            default: return nil
            }
        }

        mutating func number() -> Item? {
            var negative = false
            if peek == UInt8(ascii: "-") { negative = true; i += 1 }
            var digits = 0, value: Int64 = 0, isDecimal = false, fraction = 0
            while let c = peek {
                if c >= 0x30 && c <= 0x39 {
                    if isDecimal { fraction += 1; if fraction > 3 { return nil } } else {
                        digits += 1
                        if digits > 15 { return nil }
                        value = value * 10 + Int64(c - 0x30)
                    }
                    i += 1
                } else if c == UInt8(ascii: "."), !isDecimal, digits > 0, digits <= 12 {
                    isDecimal = true
                    i += 1
                } else {
                    break
                }
            }
            if digits == 0 || (isDecimal && fraction == 0) { return nil }
            return isDecimal ? .decimal : .integer(negative ? -value : value)
        }

        mutating func parameters() -> Bool {
            while peek == UInt8(ascii: ";") {
                i += 1
                skip(space: true)
                guard key() != nil else { return false }
                if peek == UInt8(ascii: "=") {
                    i += 1
                    guard bareItem() != nil else { return false }
                }
            }
            return true
        }

        mutating func innerList() -> [Item]? {
            i += 1  // "("
            var items: [Item] = []
            while true {
                skip(space: true)
                if peek == UInt8(ascii: ")") {
                    i += 1
                    return parameters() ? items : nil
                }
                guard let item = bareItem(), parameters() else { return nil }
                items.append(item)
                guard let c = peek, c == 0x20 || c == UInt8(ascii: ")") else { return nil }
            }
        }
    }
}

extension StructuredDictionary {
    /// A List (RFC 8941 section 4.2.1): its members (items, or inner lists
    /// as `.innerList`), parameters dropped; nil when it does not parse. An
    /// empty value is an empty list.
    static func list(_ text: String) -> [Item]? {
        var p = Parser(Array(text.utf8))
        p.skip(space: true)
        var members: [Item] = []
        if p.atEnd { return members }
        while true {
            if p.peek == UInt8(ascii: "(") {
                guard let items = p.innerList() else { return nil }
                members.append(.innerList(items))
            } else {
                guard let item = p.bareItem() else { return nil }
                members.append(item)
            }
            guard p.parameters() else { return nil }
            guard let end = p.afterMember() else { return nil }
            if end { return members }
        }
    }
}
