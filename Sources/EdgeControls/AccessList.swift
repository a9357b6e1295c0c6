/// `deny` and `allow` together: deny is read first, then allow; with an
/// allow list, an address it does not name is refused too (nginx's
/// `deny`/`allow` ... `deny all`, Varnish's `acl` with `return (synth(403))`).
public struct AccessList: Hashable, Sendable {
    public var allow: AddressList?
    public var deny: AddressList?

    public init(allow: AddressList? = nil, deny: AddressList? = nil) { (self.allow, self.deny) = (allow, deny) }

    public var isEmpty: Bool { allow == nil && deny == nil }

    public func admits(_ address: IPAddress) -> Bool {
        if let deny, deny.contains(address) { return false }
        if let allow { return allow.contains(address) }
        return true
    }
}

/// An access list as the hit path reads it: each prefix as its address
/// and mask words, in buffers its `EdgeRules` owns (a plain value: no
/// reference counted, no array bounds checked per request).
public struct PrefixTable {
    private let words: UnsafeMutablePointer<UInt64>?
    public let count: Int

    init(_ list: AddressList?) {
        let prefixes = list?.prefixes ?? []
        count = prefixes.count
        words = count > 0 ? .allocate(capacity: count * 4) : nil
        for (i, prefix) in prefixes.enumerated() {
            let mask = AddressPrefix.masked(IPAddress(high: .max, low: .max), bits: prefix.bits)
            (words! + i * 4).initialize(to: prefix.address.high)
            (words! + i * 4 + 1).initialize(to: prefix.address.low)
            (words! + i * 4 + 2).initialize(to: mask.high)
            (words! + i * 4 + 3).initialize(to: mask.low)
        }
    }

    func deallocate() { words?.deallocate() }

    @inline(__always)
    public func contains(_ address: IPAddress) -> Bool {
        for i in 0..<count {
            let w = words! + i * 4
            if address.high & w[2] == w[0] && address.low & w[3] == w[1] { return true }
        }
        return false
    }
}

/// Which address a request comes from: the socket's, unless that is a
/// trusted proxy, whose X-Forwarded-For (or Forwarded) then names it. The
/// list is read from its right end, skipping trusted proxies, so the
/// first untrusted address wins: whatever a client writes to the left of
/// it is its own claim, and could be anything.
public enum ClientAddress {
    public static func resolve(socket: IPAddress, trusted: AddressList?, forwardedFor: String?, forwarded: String?) -> IPAddress {
        guard let trusted, trusted.contains(socket) else { return socket }
        var hops: [Substring] = []
        if let forwardedFor {
            hops = forwardedFor.split(separator: ",").map { $0.trimmingSpaces() }
        } else if let forwarded {
            hops = forwarded.split(separator: ",").compactMap(forNode)
        }
        var client = socket
        for hop in hops.reversed() {
            // A hop that is not an address ("unknown", garbage): nothing
            // beyond it can be trusted, so the last good one stands.
            guard let address = IPAddress(hop) else { return client }
            client = address
            if !trusted.contains(address) { return address }
        }
        return client
    }

    /// `for=` of one Forwarded element (RFC 7239): the node, without
    /// quotes, brackets or port.
    static func forNode(_ element: Substring) -> Substring? {
        for pair in element.split(separator: ";") {
            let pair = pair.trimmingSpaces()
            guard pair.count > 4, pair.prefix(4).lowercased() == "for=" else { continue }
            var node = pair.dropFirst(4)
            if node.first == "\"", node.last == "\"", node.count >= 2 { node = node.dropFirst().dropLast() }
            if node.first == "[" {
                guard let close = node.firstIndex(of: "]") else { return nil }
                return node[node.index(after: node.startIndex)..<close]
            }
            // IPv4 with a port ("192.0.2.1:4711"): the address.
            if node.filter({ $0 == ":" }).count == 1 { return node.prefix { $0 != ":" } }
            return node
        }
        return nil
    }
}

extension Substring {
    func trimmingSpaces() -> Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
        return s
    }
}
