import HTTPHeaders

/// A configured field value: literal text and the few variables users
/// need in one (`$host`, `$client_addr`, `$request_id`; `$$` is a `$`).
public struct FieldValue: Hashable, Sendable {
    public enum Piece: Hashable, Sendable { case literal(String), host, clientAddress, requestID }
    public let pieces: [Piece]

    public static let variables = ["host": Piece.host, "client_addr": .clientAddress, "request_id": .requestID]

    /// The value, or what is wrong with it (a control byte, an unknown variable).
    public static func parse(_ text: String) -> Result<FieldValue, Problem> {
        guard text.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else { return .failure(.control) }
        var pieces: [Piece] = []
        var literal = ""
        var rest = Substring(text)
        while let dollar = rest.firstIndex(of: "$") {
            literal += rest[..<dollar]
            rest = rest[rest.index(after: dollar)...]
            if rest.first == "$" {
                literal += "$"
                rest = rest.dropFirst()
                continue
            }
            let name = rest.prefix { $0.isLetter || $0 == "_" }
            guard let piece = variables[String(name)] else { return .failure(.unknownVariable(String(name))) }
            if !literal.isEmpty { pieces.append(.literal(literal)) }
            literal = ""
            pieces.append(piece)
            rest = rest.dropFirst(name.count)
        }
        literal += rest
        if !literal.isEmpty || pieces.isEmpty { pieces.append(.literal(literal)) }
        return .success(FieldValue(pieces: pieces))
    }

    public enum Problem: Error, Equatable {
        case control
        case unknownVariable(String)

        public var message: String {
            switch self {
            case .control: return "a field value may not hold control characters (CR, LF, NUL)"
            case .unknownVariable(let name):
                return "unknown variable $\(name) (known: $host, $client_addr, $request_id; $$ for a $)"
            }
        }
    }

    public var usesRequestID: Bool { pieces.contains(.requestID) }

    /// The value as a config file writes it (`$$` for a `$`).
    public var spelled: String {
        pieces.map { piece in
            switch piece {
            case .literal(let text): return text.replacingDollars()
            case .host: return "$host"
            case .clientAddress: return "$client_addr"
            case .requestID: return "$request_id"
            }
        }.joined()
    }
    public var usesVariables: Bool { pieces.contains { if case .literal = $0 { return false } else { return true } } }

    public func render(_ values: RequestValues) -> String {
        if pieces.count == 1, case .literal(let text) = pieces[0] { return text }
        var out = ""
        for piece in pieces {
            switch piece {
            case .literal(let text): out += text
            case .host: out += values.host
            case .clientAddress: out += values.clientAddress
            case .requestID: out += values.requestID
            }
        }
        return out
    }
}

/// What a request gives a rule's variables.
public struct RequestValues {
    public var host: String
    public var clientAddress: String
    public var requestID: String

    public init(host: String, clientAddress: String, requestID: String) {
        (self.host, self.clientAddress, self.requestID) = (host, clientAddress, requestID)
    }
}

/// `request_headers` or `response_headers`: fields removed, then set
/// (every field of the name replaced by one), then added.
public struct HeaderRules: Hashable, Sendable {
    public struct Entry: Hashable, Sendable {
        /// As written in the file (HTTP/1.1 heads keep it); `lowercased` for matching.
        public let name: String
        public let lowercased: String
        public let value: FieldValue

        public init(name: String, value: FieldValue) {
            self.name = name
            lowercased = name.lowercased()
            self.value = value
        }
    }

    public let sets: [Entry]
    public let adds: [Entry]
    /// Lowercased names removed.
    public let removes: [String]
    /// Every name a stored or forwarded field of is dropped: removed or set.
    public let dropped: [String]
    /// The fields set and added when no value has a variable: made once,
    /// not per request.
    public let literalFields: [HeaderField]?

    public init(set: [Entry] = [], add: [Entry] = [], remove: [String] = []) {
        sets = set
        adds = add
        removes = remove.map { $0.lowercased() }
        var dropped = removes
        for entry in set where !dropped.contains(entry.lowercased) { dropped.append(entry.lowercased) }
        self.dropped = dropped
        let entries = set + add
        literalFields = entries.allSatisfy({ $0.value.pieces.count == 1 && !$0.value.usesVariables })
            ? entries.map { HeaderField(lowercasedName: $0.lowercased, value: $0.value.render(RequestValues(host: "", clientAddress: "", requestID: ""))) }
            : nil
    }

    public var isEmpty: Bool { sets.isEmpty && adds.isEmpty && removes.isEmpty }
    public var usesRequestID: Bool { (sets + adds).contains { $0.value.usesRequestID } }

    /// Whether a field of this (lowercased) name is dropped.
    @inline(__always)
    public func drops(_ name: String) -> Bool { dropped.contains { $0.isField(name) } }

    /// These rules applied over `base` (a route's over the global ones):
    /// both removals, the route's sets over the base's of the same name,
    /// both additions but those of a name the route removes or sets.
    public func applied(over base: HeaderRules) -> HeaderRules {
        let mine = Swift.Set(dropped)
        return HeaderRules(set: base.sets.filter { !mine.contains($0.lowercased) } + sets,
                           add: base.adds.filter { !mine.contains($0.lowercased) } + adds,
                           remove: Array(Swift.Set(base.removes + removes)).sorted())
    }

    /// The fields set and added, rendered for one request, in order.
    public func fields(_ values: @autoclosure () -> RequestValues) -> [HeaderField] {
        if let literalFields { return literalFields }
        let values = values()
        return (sets + adds).map { HeaderField(lowercasedName: $0.lowercased, value: $0.value.render(values)) }
    }

    /// Applies the rules to fields going out (towards the upstream, or a
    /// head built from fields).
    public func apply(to fields: inout HeaderFields, _ values: RequestValues) {
        if !dropped.isEmpty { fields.fields.removeAll { drops($0.name) } }
        for field in self.fields(values) { fields.append(field) }
    }

    /// Field names Larder frames messages with: never set, added or
    /// removed by a rule (a rule could only break the framing).
    public static let framingFields: Swift.Set<String> = ["content-length", "transfer-encoding", "connection", "keep-alive",
                                                          "upgrade", "te", "trailer", "proxy-connection"]
    /// Fields Larder writes on every answer itself (towards clients).
    public static let answerFields: Swift.Set<String> = ["age", "cache-status", "date", "alt-svc"]

    /// tchar (RFC 9110 section 5.6.2): what a field name is made of.
    public static func isFieldName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }
}

extension String {
    func replacingDollars() -> String { split(separator: "$", omittingEmptySubsequences: false).joined(separator: "$$") }
}
