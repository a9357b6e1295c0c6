import HTTPHeaders

/// Hop-by-hop header fields (RFC 9110 section 7.6.1): never forwarded.
public enum HopByHop {
    public static let names: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer",
        "transfer-encoding", "upgrade", "proxy-authenticate", "proxy-authorization",
    ]

    /// Whether `name` (lowercased) is one of `names`; compares only names of
    /// the same length (no hashing: this runs for every upstream field).
    public static func isHopByHop(_ name: String) -> Bool {
        switch name.utf8.count {
        case 2: return name == "te"
        case 7: return name == "trailer" || name == "upgrade"
        case 10: return name == "connection" || name == "keep-alive"
        case 16: return name == "proxy-connection"
        case 17: return name == "transfer-encoding"
        case 18: return name == "proxy-authenticate"
        case 19: return name == "proxy-authorization"
        default: return false
        }
    }

    /// The lowercased field names a message's Connection header nominates.
    public static func nominated(by headers: HeaderFields) -> Set<String> {
        nominated(byConnectionValues: headers.lazy.filter { $0.name == "connection" }.map(\.value))
    }

    /// The lowercased names a response's Connection fields nominate (fields
    /// as curl reports them). Not generic, and nothing built for the usual
    /// "keep-alive": this runs for every upstream response.
    public static func nominated(inFields fields: HeaderFields) -> Set<String> {
        var result: Set<String> = []
        for field in fields where field.name.utf8.count == 10 && field.name == "connection" {
            if isPlainConnectionValue(field.value) { continue }
            result.formUnion(nominated(byConnectionValues: CollectionOfOne(field.value)))
        }
        return result
    }

    /// The lowercased names listed in Connection header values.
    public static func nominated<S: Sequence<String>>(byConnectionValues values: S) -> Set<String> {
        var result: Set<String> = []
        for value in values {
            // The usual values name nothing beyond the standard hop-by-hop
            // fields: skip splitting and hashing (this runs on every miss).
            if isPlainConnectionValue(value) { continue }
            for token in splitList(value) where !token.isEmpty {
                result.insert(token.lowercased())
            }
        }
        return result
    }

    /// "keep-alive" or "close" in any case: nominates no other field.
    static func isPlainConnectionValue(_ value: String) -> Bool {
        let count = value.utf8.count
        guard count == 10 || count == 5 else { return false }
        // Compared as little-endian words with the letters' case bit set
        // (b | 0x20 equals a lowercase letter only for that letter in either
        // case); the '-' keeps its exact byte.
        var value = value
        return value.withUTF8 { v in
            var word: UInt64 = 0
            for i in 0..<min(count, 8) { word |= UInt64(v[i]) << (8 * UInt64(i)) }
            if count == 5 { return word | 0x20_2020_2020 == 0x65_736F_6C63 }  // "close"
            let tail = UInt16(v[8]) | UInt16(v[9]) << 8
            return word | 0x2020_2000_2020_2020 == 0x696C_612D_7065_656B && tail | 0x2020 == 0x6576  // "keep-ali" "ve"
        }
    }

    /// `headers` without hop-by-hop fields and without those `Connection` names.
    public static func strip(_ headers: HeaderFields) -> HeaderFields {
        let nominated = nominated(by: headers)
        return headers.filter { !isHopByHop($0.name) && !nominated.contains($0.name) }
    }
}
