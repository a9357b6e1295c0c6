#if canImport(Glibc)
import Glibc
#endif

/// A client's address as 128 bits: IPv6 as it is, IPv4 as its mapped
/// form (`::ffff:a.b.c.d`), so one prefix list holds both and a
/// dual-stack socket's mapped peers match IPv4 prefixes.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) { (self.high, self.low) = (high, low) }

    /// Parses an IPv4 or IPv6 literal (no brackets, no zone, no port); nil otherwise.
    public init?(_ text: Substring) {
        guard !text.isEmpty, text.utf8.count <= 45 else { return nil }
        var v6 = in6_addr(), v4 = in_addr()
        let parsed: (UInt64, UInt64)? = String(text).withCString { literal in
            if inet_pton(AF_INET, literal, &v4) == 1 { return (0, 0xFFFF_0000_0000 | UInt64(UInt32(bigEndian: v4.s_addr))) }
            guard inet_pton(AF_INET6, literal, &v6) == 1 else { return nil }
            return withUnsafeBytes(of: &v6) { raw in
                (UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                 UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
            }
        }
        guard let parsed else { return nil }
        (high, low) = parsed
    }

    public init?(_ text: String) { self.init(Substring(text)) }

    /// An IPv4 address (or an IPv4-mapped IPv6 one).
    public var isIPv4: Bool { high == 0 && low >> 32 == 0xFFFF }

    public var description: String {
        if isIPv4 {
            let v = UInt32(truncatingIfNeeded: low)
            return "\(v >> 24).\((v >> 16) & 0xFF).\((v >> 8) & 0xFF).\(v & 0xFF)"
        }
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { raw in
            raw.storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: low.bigEndian, toByteOffset: 8, as: UInt64.self)
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        return inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil
            ? String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "::"
    }
}

/// An address and how many of its leading bits a match needs (CIDR:
/// `10.0.0.0/8`, `2001:db8::/32`; a bare address is all of its bits).
public struct AddressPrefix: Hashable, Sendable, CustomStringConvertible {
    public let address: IPAddress
    /// Leading bits of the 128 (an IPv4 prefix's length plus 96).
    public let bits: Int

    /// Parses `ADDRESS` or `ADDRESS/LENGTH`; nil for anything else, or
    /// for an address with bits set beyond its length (`10.0.0.1/8` is
    /// more likely a mistake than a network).
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(parts[0]) else { return nil }
        let width = address.isIPv4 && !parts[0].contains(":") ? 32 : 128
        var length = width
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].utf8.count <= 3, parts[1].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let n = Int(parts[1]), n <= width else { return nil }
            length = n
        }
        bits = length + (128 - width)
        guard Self.masked(address, bits: bits) == address else { return nil }
        self.address = address
    }

    static func masked(_ address: IPAddress, bits: Int) -> IPAddress {
        let highMask: UInt64 = bits >= 64 ? .max : bits == 0 ? 0 : ~(UInt64.max >> UInt64(bits))
        let lowMask: UInt64 = bits >= 128 ? .max : bits <= 64 ? 0 : ~(UInt64.max >> UInt64(bits - 64))
        return IPAddress(high: address.high & highMask, low: address.low & lowMask)
    }

    public func contains(_ other: IPAddress) -> Bool { Self.masked(other, bits: bits) == address }

    public var description: String {
        address.isIPv4 ? "\(address)/\(bits - 96)" : "\(address)/\(bits)"
    }
}

/// Addresses and prefixes, as `allow`, `deny`, `admin_allow` and
/// `trusted_proxies` give them.
public struct AddressList: Hashable, Sendable {
    public let prefixes: [AddressPrefix]

    public init(_ prefixes: [AddressPrefix]) { self.prefixes = prefixes }

    /// Parses every entry; the first that is not an address or prefix is the error.
    public static func parse(_ entries: [String]) -> Result<AddressList, BadEntry> {
        var prefixes: [AddressPrefix] = []
        for entry in entries {
            guard let prefix = AddressPrefix(entry) else { return .failure(BadEntry(entry: entry)) }
            prefixes.append(prefix)
        }
        return .success(AddressList(prefixes))
    }

    public struct BadEntry: Error, Equatable { public let entry: String }

    public func contains(_ address: IPAddress) -> Bool { prefixes.contains { $0.contains(address) } }
}
