/// Virtual hosts: the request's host name as routes match it and as cache
/// keys carry it. With any route naming `hosts`, a key is the target, one
/// space, and the host name ("/a?b example.com"): a space never occurs in a
/// request target, so the two parts always split apart again.
public enum VirtualHosts {
    /// The separator between a key's target and its host.
    public static let separator: UInt8 = 0x20

    /// A Host field's name as keys and routes use it: lowercased, without
    /// port and trailing dot; "" for a missing or malformed one (it matches
    /// no route that names hosts, and is a key of its own).
    public static func name(_ host: String?) -> String {
        guard let host, !host.isEmpty, host.utf8.count <= 255 else { return "" }
        var bytes = Array(host.utf8)
        if bytes[0] == UInt8(ascii: "[") {
            // An IPv6 literal: "[::1]" or "[::1]:8080".
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return "" }
            let port = bytes[(close + 1)...]
            guard port.isEmpty || isPort(port.dropFirst()) && port.first == UInt8(ascii: ":") else { return "" }
            bytes = Array(bytes[...close])
            guard bytes.dropFirst().dropLast().allSatisfy({ isHex($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") })
            else { return "" }
        } else {
            if let colon = bytes.lastIndex(of: UInt8(ascii: ":")) {
                guard isPort(bytes[(colon + 1)...]) else { return "" }
                bytes.removeSubrange(colon...)
            }
            if bytes.last == UInt8(ascii: ".") { bytes.removeLast() }
            guard !bytes.isEmpty, bytes.allSatisfy(isNameByte) else { return "" }
        }
        return String(decoding: bytes.map(lowercased), as: UTF8.self)
    }

    /// A configured host pattern, checked and lowercased: a name
    /// ("api.example.com") or "*." and a name (every name under it). Nil
    /// when it is neither.
    public static func pattern(_ text: String) -> String? {
        let body = text.hasPrefix("*.") ? text.dropFirst(2) : Substring(text)
        guard !body.isEmpty, body.utf8.count <= 253, !body.hasPrefix("."), !body.hasSuffix("."),
              body.utf8.allSatisfy(isNameByte) else { return nil }
        return String(decoding: text.utf8.map(lowercased), as: UTF8.self)
    }

    /// A key (or a purge target) split into its target and, where it
    /// carries one, its host.
    public static func split(_ key: String) -> (target: Substring, host: Substring?) {
        guard let space = key.utf8.lastIndex(of: separator) else { return (Substring(key), nil) }
        return (key[..<space], key[key.utf8.index(after: space)...])
    }

    private static func isNameByte(_ b: UInt8) -> Bool {
        (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x2E || b == 0x5F
    }
    private static func isHex(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46)
    }
    private static func isPort(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.count <= 5 && bytes.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }
    private static func lowercased(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b + 0x20 : b }
}
