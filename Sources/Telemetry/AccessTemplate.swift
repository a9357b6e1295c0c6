/// How access lines are written: `text` (fixed columns), `json` (one
/// object a line) or `custom`, a template of named fields as nginx's
/// `log_format` (`access_log_format = "custom"`, `access_log_template`).
public enum AccessLogFormat: Equatable, Sendable {
    case text, json
    case custom(AccessTemplate)
}

/// A line template: literal text and `$name` fields (`${name}` where a
/// letter follows, `$$` for a dollar sign), parsed once when the
/// configuration is read; an unknown field is an error naming it.
public struct AccessTemplate: Equatable, Sendable {
    /// The fields a template may name (docs/observability.md says each).
    public enum Field: String, CaseIterable, Sendable {
        case time, client, host, method, target, `protocol`, status, bytes, first_byte_ms, total_ms, result, cache
        case upstream_addr, upstream_status, upstream_ms, tls_sni, worker
    }

    enum Piece: Equatable, Sendable {
        case literal([UInt8])
        case field(Field)
    }

    let pieces: [Piece]
    /// The literal bytes, for the room a line needs.
    let literalBytes: Int

    public struct ParseError: Error, CustomStringConvertible {
        public let description: String
    }

    public init(_ template: String) throws(ParseError) {
        var pieces: [Piece] = [], literal: [UInt8] = []
        let bytes = Array(template.utf8)
        var i = 0
        func isNameByte(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7A) || b == 0x5F || (b >= 0x30 && b <= 0x39) }
        while i < bytes.count {
            guard bytes[i] == UInt8(ascii: "$") else {
                literal.append(bytes[i])
                i += 1
                continue
            }
            if i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "$") {
                literal.append(UInt8(ascii: "$"))
                i += 2
                continue
            }
            let braced = i + 1 < bytes.count && bytes[i + 1] == UInt8(ascii: "{")
            var end = i + (braced ? 2 : 1)
            let start = end
            while end < bytes.count, isNameByte(bytes[end]) { end += 1 }
            let name = String(decoding: bytes[start..<end], as: UTF8.self)
            if braced {
                guard end < bytes.count, bytes[end] == UInt8(ascii: "}") else {
                    throw ParseError(description: "unclosed ${ at byte \(i + 1) of the template")
                }
                end += 1
            }
            guard let field = Field(rawValue: name) else {
                throw ParseError(description: "unknown field $\(name) (known: "
                                 + Field.allCases.map { "$" + $0.rawValue }.joined(separator: ", ") + "; $$ for a dollar sign)")
            }
            if !literal.isEmpty { pieces.append(.literal(literal)) }
            literal = []
            pieces.append(.field(field))
            i = end
        }
        if !literal.isEmpty { pieces.append(.literal(literal)) }
        guard pieces.contains(where: { if case .field = $0 { return true } else { return false } }) else {
            throw ParseError(description: "the template names no field (e.g. \"$time $client $method $target $status\")")
        }
        self.pieces = pieces
        literalBytes = pieces.reduce(0) { if case .literal(let l) = $1 { return $0 + l.count } else { return $0 } }
    }
}
