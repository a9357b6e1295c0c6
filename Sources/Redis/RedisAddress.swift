import EventLoop
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// Where Redis listens, from the `redis` setting: `redis://HOST[:PORT][/DB]`
/// (IPv6 hosts in brackets; port 6379, database 0 by default),
/// `rediss://...` (the same over TLS), or `unix:/PATH`. A password never goes in the address (it would end up in
/// logs and `ps`): it comes from `password_file`.
public struct RedisAddress: Equatable, Sendable, CustomStringConvertible {
    public enum Endpoint: Equatable, Sendable {
        case tcp(host: String, port: Int)
        case unix(path: String)
    }

    public let endpoint: Endpoint
    public let database: Int
    /// `rediss://`: TLS, the server's certificate checked against its host.
    public let tls: Bool
    /// The host as written (kept when the name is resolved): what the
    /// certificate must name.
    public let serverName: String

    public init(endpoint: Endpoint, database: Int = 0, tls: Bool = false, serverName: String? = nil) {
        self.endpoint = endpoint
        self.database = database
        self.tls = tls
        if case .tcp(let host, _) = endpoint { self.serverName = serverName ?? host } else { self.serverName = serverName ?? "" }
    }

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    public init(parsing text: String) throws(ParseError) {
        func fail(_ why: String) -> ParseError {
            ParseError(description: "redis address \"\(text)\": \(why) (expected redis://HOST[:PORT][/DB], rediss://... or unix:/PATH)")
        }
        if text.hasPrefix("unix:") {
            var path = Substring(text.dropFirst(5))
            if path.hasPrefix("//") { path = path.dropFirst(2) }
            guard path.first == "/", path.count > 1 else { throw fail("a unix socket needs an absolute path") }
            self.init(endpoint: .unix(path: String(path)))
            return
        }
        let tls = text.hasPrefix("rediss://")
        guard tls || text.hasPrefix("redis://") else { throw fail("unknown scheme") }
        var rest = Substring(text.dropFirst(tls ? 9 : 8))
        guard !rest.contains("@") else { throw fail("credentials do not go in the address; put the password in password_file") }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            if !db.isEmpty {
                guard let n = Int(db), n >= 0, n < 1 << 16 else { throw fail("the database must be a number") }
                database = n
            }
            rest = rest[..<slash]
        }
        let host: Substring, portText: Substring?
        if rest.first == "[" {
            guard let close = rest.firstIndex(of: "]") else { throw fail("unclosed [ in the host") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            guard after.isEmpty || after.first == ":" else { throw fail("unexpected text after the host") }
            portText = after.isEmpty ? nil : after.dropFirst()
        } else if let colon = rest.firstIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            (host, portText) = (rest, nil)
        }
        guard !host.isEmpty else { throw fail("no host") }
        var port = 6379
        if let portText {
            guard let n = Int(portText), (1...65535).contains(n) else { throw fail("the port must be 1-65535") }
            port = n
        }
        self.init(endpoint: .tcp(host: String(host), port: port), database: database, tls: tls)
    }

    /// Whether only this machine can reach it (a unix socket, a loopback
    /// address): elsewhere Larder requires a password.
    public var isLocal: Bool {
        switch endpoint {
        case .unix: return true
        case .tcp(let host, _):
            let octets = host.split(separator: ".", omittingEmptySubsequences: false)
            let isIPv4 = octets.count == 4 && octets.allSatisfy { UInt8($0) != nil }
            return host == "localhost" || host == "::1" || (isIPv4 && octets[0] == "127")
        }
    }

    public var description: String {
        switch endpoint {
        case .unix(let path): return "unix:\(path)"
        case .tcp(let host, let port):
            let shown = host.contains(":") ? "[\(host)]" : host
            return (tls ? "rediss://" : "redis://") + "\(shown):\(port)" + (database == 0 ? "" : "/\(database)")
        }
    }
}

extension RedisAddress {
    /// Whether connecting asks a name server first: a TCP host that is not
    /// a numeric IPv4 or IPv6 address. Such an address is `resolved()` off
    /// the loop before a connection is made with it.
    public var needsLookup: Bool {
        guard case .tcp(let host, _) = endpoint else { return false }
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) != 1 && inet_pton(AF_INET6, host, &v6) != 1
    }

    /// The same address with its host name resolved to a numeric address
    /// (the first getaddrinfo gives), so that connecting never waits on a
    /// name server: a worker's loop connects with it. Unchanged when the
    /// host is numeric already, a unix socket, or cannot be resolved now.
    public func resolved() -> RedisAddress {
        guard case .tcp(let host, let port) = endpoint else { return self }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &found) == 0, let first = found else { return self }
        defer { freeaddrinfo(found) }
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard getnameinfo(first.pointee.ai_addr, first.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0
        else { return self }
        return RedisAddress(endpoint: .tcp(host: String(cString: text), port: port), database: database, tls: tls, serverName: serverName)
    }
}

extension RedisAddress {
    /// Calls `connect` on `loop` with the address to connect to: at once
    /// when it is numeric, else once resolved on an I/O thread (at every
    /// connect: a name's address may move), so a loop never waits on DNS.
    public func whenResolved(on loop: EventLoop, _ connect: @escaping (RedisAddress) -> Void) {
        guard needsLookup else { return connect(self) }
        BlockingWork.shared.run({ self.resolved() }, on: loop, then: connect)
    }
}
