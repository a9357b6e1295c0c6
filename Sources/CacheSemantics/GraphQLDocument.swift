/// A GraphQL document read only as far as telling a document of queries
/// from anything else (GraphQL spec, "Document" and "Lexical Tokens"). It
/// fails closed: a document is cached only when every definition is a
/// query (`query ...` or a bare selection set) or a fragment, and at least
/// one is a query; a mutation, a subscription, a type system definition, a
/// word that is no keyword (they are case-sensitive), unbalanced brackets
/// or a character GraphQL has no token for make it a write. Bounded: one
/// pass, a bracket stack no deeper than `maxDepth`.
enum GraphQLDocument {
    static let maxDepth = 256

    /// Why the document is not read as queries only; nil when it is.
    static func refusal(_ b: [UInt8]) -> String? {
        var lexer = Lexer(b: b)
        var operations = 0
        while let token = lexer.next() {
            switch token {
            case .punctuator(UInt8(ascii: "{")):
                // A bare selection set: a query.
                guard lexer.skipBalanced(opening: UInt8(ascii: "{")) else { return "a GraphQL document not read whole" }
                operations += 1
            case .name(let word) where word == "query" || word == "fragment":
                // Its name, variables and directives, then its selection set.
                guard lexer.skipToSelectionSet() else { return "a GraphQL document not read whole" }
                if word == "query" { operations += 1 }
            case .name(let word) where word == "mutation" || word == "subscription":
                return "a GraphQL \(word)"
            case .invalid:
                return "a GraphQL document not read whole"
            default:
                return "a GraphQL document with a definition that is not a query"
            }
        }
        return operations > 0 ? nil : "a GraphQL document with no query"
    }

    enum Token: Equatable {
        case name(String)
        case punctuator(UInt8)
        /// A number, a string or `...`: never where a definition begins.
        case value
        case invalid
    }

    struct Lexer {
        let b: [UInt8]
        var i = 0

        /// Skips the tokens of a definition's head up to and through its
        /// selection set; false when it has none or is not balanced.
        mutating func skipToSelectionSet() -> Bool {
            while let token = next() {
                switch token {
                case .punctuator(UInt8(ascii: "{")): return skipBalanced(opening: UInt8(ascii: "{"))
                case .punctuator(let p) where p == UInt8(ascii: "(") || p == UInt8(ascii: "["):
                    guard skipBalanced(opening: p) else { return false }
                case .punctuator(let p) where p == UInt8(ascii: "}") || p == UInt8(ascii: ")") || p == UInt8(ascii: "]"):
                    return false
                case .invalid: return false
                default: continue
                }
            }
            return false
        }

        /// After `opening`: through its closing bracket, nested ones matched.
        mutating func skipBalanced(opening: UInt8) -> Bool {
            var stack: [UInt8] = [opening]
            while let token = next() {
                guard case .punctuator(let p) = token else {
                    if token == .invalid { return false }
                    continue
                }
                switch p {
                case UInt8(ascii: "{"), UInt8(ascii: "("), UInt8(ascii: "["):
                    guard stack.count < GraphQLDocument.maxDepth else { return false }
                    stack.append(p)
                case UInt8(ascii: "}"), UInt8(ascii: ")"), UInt8(ascii: "]"):
                    guard let open = stack.popLast(), Self.closing(open) == p else { return false }
                    if stack.isEmpty { return true }
                default: continue
                }
            }
            return false
        }

        static func closing(_ open: UInt8) -> UInt8 {
            switch open {
            case UInt8(ascii: "{"): UInt8(ascii: "}")
            case UInt8(ascii: "("): UInt8(ascii: ")")
            default: UInt8(ascii: "]")
            }
        }

        /// The next token; nil at the end. White space, commas, comments
        /// and a byte order mark are ignored, as GraphQL ignores them.
        mutating func next() -> Token? {
            while i < b.count {
                let c = b[i]
                if c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D || c == UInt8(ascii: ",") {
                    i += 1
                } else if c == 0xEF, b[i...].starts(with: [0xEF, 0xBB, 0xBF]) {
                    i += 3
                } else if c == UInt8(ascii: "#") {
                    while i < b.count, b[i] != 0x0A, b[i] != 0x0D { i += 1 }
                } else {
                    break
                }
            }
            guard i < b.count else { return nil }
            let c = b[i]
            if Self.isNameStart(c) {
                let start = i
                while i < b.count, Self.isNameStart(b[i]) || Self.isDigit(b[i]) { i += 1 }
                return .name(String(decoding: b[start..<i], as: UTF8.self))
            }
            if c == UInt8(ascii: "\"") { return string() ? .value : .invalid }
            if c == UInt8(ascii: "-") || Self.isDigit(c) {
                i += 1
                while i < b.count, Self.isDigit(b[i]) || b[i] == UInt8(ascii: ".") || b[i] == UInt8(ascii: "e")
                        || b[i] == UInt8(ascii: "E") || b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
                return .value
            }
            if b[i...].starts(with: "...".utf8) { i += 3; return .value }
            i += 1
            return "!$&():=@[]{|}".utf8.contains(c) ? .punctuator(c) : .invalid
        }

        /// A string or a block string; false when it does not end.
        private mutating func string() -> Bool {
            let block = b[i...].starts(with: "\"\"\"".utf8)
            i += block ? 3 : 1
            while i < b.count {
                if block {
                    if b[i...].starts(with: "\\\"\"\"".utf8) { i += 4; continue }
                    if b[i...].starts(with: "\"\"\"".utf8) { i += 3; return true }
                } else {
                    if b[i] == 0x0A || b[i] == 0x0D { return false }
                    if b[i] == UInt8(ascii: "\\") { i += 2; continue }
                    if b[i] == UInt8(ascii: "\"") { i += 1; return true }
                }
                i += 1
            }
            return false
        }

        static func isNameStart(_ c: UInt8) -> Bool {
            (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || c == UInt8(ascii: "_")
        }

        static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    }
}
