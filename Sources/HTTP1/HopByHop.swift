/// Hop-by-hop header fields (RFC 9110 section 7.6.1): never forwarded.
public enum HopByHop {
    public static let names: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer",
        "transfer-encoding", "upgrade", "proxy-authenticate", "proxy-authorization",
    ]

    /// The lowercased field names a message's Connection header nominates.
    public static func nominated(by headers: [HeaderField]) -> Set<String> {
        nominated(byConnectionValues: headers.lazy.filter { $0.name == "connection" }.map(\.value))
    }

    /// The lowercased names listed in Connection header values.
    public static func nominated<S: Sequence<String>>(byConnectionValues values: S) -> Set<String> {
        var result: Set<String> = []
        for value in values {
            for token in splitList(value) where !token.isEmpty {
                result.insert(token.lowercased())
            }
        }
        return result
    }

    /// `headers` without hop-by-hop fields and without those `Connection` names.
    public static func strip(_ headers: [HeaderField]) -> [HeaderField] {
        let nominated = nominated(by: headers)
        return headers.filter { !names.contains($0.name) && !nominated.contains($0.name) }
    }
}
