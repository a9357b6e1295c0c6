import HTTPHeaders

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

    public static func of(_ fields: HeaderFields) -> ResponseFraming {
        var length = -1
        for field in fields {
            if field.name.isField("transfer-encoding") { return .transferCoded }
            guard field.name.isField("content-length") else { continue }
            // Comma-separated decimal lengths, read in place (every miss).
            var value = field.value
            let verdict = value.withUTF8 { b -> Int? in
                var i = 0
                while true {
                    while i < b.count && (b[i] == 0x20 || b[i] == 0x09) { i += 1 }
                    var n = 0, digits = 0
                    while i < b.count && b[i] >= 0x30 && b[i] <= 0x39 && digits < 18 {
                        n = n * 10 + Int(b[i] - 0x30)
                        digits += 1
                        i += 1
                    }
                    while i < b.count && (b[i] == 0x20 || b[i] == 0x09) { i += 1 }
                    guard digits > 0, i == b.count || b[i] == 0x2C else { return nil }
                    if length >= 0 && length != n { return -1 }
                    length = n
                    if i == b.count { return length }
                    i += 1
                }
            }
            switch verdict {
            case nil: return scanForTransferEncoding(fields) ?? .invalid("invalid Content-Length \"\(field.value)\"")
            case -1: return scanForTransferEncoding(fields) ?? .invalid("conflicting Content-Length values")
            default: continue
            }
        }
        return length >= 0 ? .length(length) : .unspecified
    }

    /// A Transfer-Encoding later in the fields still wins over a bad length.
    private static func scanForTransferEncoding(_ fields: HeaderFields) -> ResponseFraming? {
        fields.contains("transfer-encoding") ? .transferCoded : nil
    }
}
