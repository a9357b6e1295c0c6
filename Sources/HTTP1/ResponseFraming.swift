/// How an upstream response's body is delimited, as RFC 9112 section 6.3
/// tells a proxy to decide it: Transfer-Encoding wins over Content-Length
/// (which must then be removed, or the next hop would frame the body by a
/// length the bytes do not have: response splitting), repeated identical
/// lengths count as one, and anything else in Content-Length makes the
/// response unusable (502).
public enum ResponseFraming: Equatable, Sendable {
    /// Transfer-Encoding: the length is whatever the decoded body turns out to be.
    case transferCoded
    case length(Int)
    /// No length: the body ends when the connection closes (or there is none).
    case unspecified
    case invalid(String)

    public static func of(_ fields: [(name: String, value: String)]) -> ResponseFraming {
        var length: Int?
        var sawLength = false
        for field in fields {
            if field.name.isField("transfer-encoding") { return .transferCoded }
            guard field.name.isField("content-length") else { continue }
            for element in field.value.split(separator: ",", omittingEmptySubsequences: false) {
                let digits = element.utf8.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }
                guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                    return scanForTransferEncoding(fields) ?? .invalid("invalid Content-Length \"\(field.value)\"")
                }
                let n = digits.reversed().reduce(0) { $0 * 10 + Int($1 - 0x30) }
                if sawLength && length != n {
                    return scanForTransferEncoding(fields) ?? .invalid("conflicting Content-Length values")
                }
                sawLength = true
                length = n
            }
        }
        return length.map { .length($0) } ?? .unspecified
    }

    /// A Transfer-Encoding later in the fields still wins over a bad length.
    private static func scanForTransferEncoding(_ fields: [(name: String, value: String)]) -> ResponseFraming? {
        fields.contains { $0.name.isField("transfer-encoding") } ? .transferCoded : nil
    }
}
