import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Redis
import TOMLKit

/// The `[fleet]` table: this node's place in a fleet of Larder nodes that
/// share one Redis (purges applied on any node reach every node).
public struct FleetConfig: Equatable {
    /// `redis`: the one Redis (unused with `sentinels`).
    public var address: RedisAddress
    /// Redis Sentinel instead: where to ask (`sentinels`), for which master (`master`).
    public var sentinels: [RedisAddress] = []
    public var masterName: String?
    public var sentinelPasswordFile: String?
    /// `rediss://`: the certificate authorities (PEM) Redis's certificate
    /// is checked against; nil: the system's.
    public var tlsCAFile: String?
    /// The prefix of every Redis key: two fleets may share a Redis.
    public var name = "larder"
    /// This node's name in the fleet (default: the host name).
    public var node = FleetConfig.hostName
    public var passwordFile: String?
    public var connectTimeoutMilliseconds: UInt64 = 2_000
    public var timeoutMilliseconds: UInt64 = 2_000
    /// The largest body the shared tier keeps (larger ones stay local).
    public var maxObjectBytes = 1 << 20

    public static let keys = ["redis", "sentinels", "master", "name", "node", "password_file", "sentinel_password_file",
                              "tls_ca_file", "max_object_size", "connect_timeout", "timeout"]

    /// Whether the master is the one Redis Sentinel names.
    public var followsSentinel: Bool { !sentinels.isEmpty }

    /// How logs name where the fleet's Redis is.
    public var shown: String {
        guard followsSentinel else { return address.description }
        return "master \(masterName ?? "") via sentinels " + sentinels.map(Self.sentinelText).joined(separator: ", ")
    }

    /// A sentinel as `sentinels` lists it: "HOST:PORT".
    public static func sentinelText(_ address: RedisAddress) -> String {
        guard case .tcp(let host, let port) = address.endpoint else { return address.description }
        return (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    }

    /// A `sentinels` entry: "HOST[:PORT]" (port 26379 by default; IPv6 in brackets).
    static func sentinel(_ text: String) -> RedisAddress? {
        guard !text.isEmpty, !text.contains("/"), !text.contains("@"),
              case .tcp(let host, let port)? = (try? RedisAddress(parsing: "redis://" + text))?.endpoint else { return nil }
        let givesPort = text.hasPrefix("[") ? text.contains("]:") : text.contains(":")
        return RedisAddress(endpoint: .tcp(host: host, port: givesPort ? port : 26379))
    }

    public static var hostName: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "larder" }
        let name = String(cString: buffer)
        return name.isEmpty ? "larder" : name
    }

    /// Names go into Redis keys and log lines: letters, digits and . _ -.
    public static func isName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                     UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): return true
                default: return false
                }
            }
    }

    /// Reads `[fleet]`; `fail(key, message)` makes the error for a key.
    public static func parse(_ table: TOMLTable, fail: (String, String) -> ConfigError) throws(ConfigError) -> FleetConfig {
        for key in table.keys where !keys.contains(key) {
            throw fail(key, UnknownKey.message("fleet key", key, known: keys))
        }
        var config: FleetConfig
        if let item = table["sentinels"] {
            guard table["redis"] == nil else {
                throw fail("sentinels", "give either redis (one Redis) or sentinels and master (Redis Sentinel), not both")
            }
            let texts = item.array.map { $0.compactMap(\.string) }
            guard let texts, texts.count == item.array?.count, !texts.isEmpty, texts.count <= 16 else {
                throw fail("sentinels", "expected a list of 1 to 16 \"HOST:PORT\" strings, such as [\"10.0.0.1:26379\", \"10.0.0.2:26379\"]")
            }
            var sentinels: [RedisAddress] = []
            for text in texts {
                guard let address = sentinel(text) else {
                    throw fail("sentinels", "\"\(text)\" is not HOST:PORT (such as \"10.0.0.1:26379\" or \"[::1]:26379\")")
                }
                sentinels.append(address)
            }
            guard let name = table["master"]?.string, !name.isEmpty, name.utf8.count <= 128,
                  name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw fail("master", "sentinels need master = \"NAME\": the name the sentinels monitor (sentinel monitor NAME ...)")
            }
            config = FleetConfig(address: sentinels[0])
            (config.sentinels, config.masterName) = (sentinels, name)
        } else {
            guard table["master"] == nil else { throw fail("master", "master names what sentinels monitor: give sentinels too") }
            guard let text = table["redis"]?.string else {
                throw fail("redis", "[fleet] needs redis = \"redis://HOST[:PORT][/DB]\" or \"unix:/PATH\" (or sentinels and master)")
            }
            do {
                config = FleetConfig(address: try RedisAddress(parsing: text))
            } catch {
                throw fail("redis", error.description)
            }
        }
        for key in ["name", "node"] {
            guard let item = table[key] else { continue }
            guard let value = item.string, isName(value) else {
                throw fail(key, "expected a name of letters, digits, '.', '_' or '-' (at most 64)")
            }
            if key == "name" { config.name = value } else { config.node = value }
        }
        for key in ["password_file", "sentinel_password_file", "tls_ca_file"] {
            guard let item = table[key] else { continue }
            guard let path = item.string, !path.isEmpty else { throw fail(key, "expected a file path string") }
            switch key {
            case "password_file": config.passwordFile = path
            case "sentinel_password_file": config.sentinelPasswordFile = path
            default: config.tlsCAFile = path
            }
        }
        if config.tlsCAFile != nil && (config.followsSentinel || !config.address.tls) {
            throw fail("tls_ca_file", "the certificate authorities are for TLS to Redis: give redis = \"rediss://HOST[:PORT]\"")
        }
        if config.sentinelPasswordFile != nil && !config.followsSentinel {
            throw fail("sentinel_password_file", "the sentinels' password is for sentinels = [...]: give them too")
        }
        if let item = table["max_object_size"] {
            let bytes = item.int ?? item.string.flatMap(Units.parseSize)
            guard let bytes, bytes >= 1, bytes <= 64 << 20 else {
                throw fail("max_object_size", "expected a size from 1 byte to \"64MiB\", such as \"1MiB\"")
            }
            config.maxObjectBytes = bytes
        }
        for key in ["connect_timeout", "timeout"] {
            guard let item = table[key] else { continue }
            guard let text = item.string, let ms = Units.parseDurationMilliseconds(text), ms >= 10, ms <= 60_000 else {
                throw fail(key, "expected a duration string from \"10ms\" to \"60s\", such as \"2s\"")
            }
            if key == "timeout" { config.timeoutMilliseconds = UInt64(ms) } else { config.connectTimeoutMilliseconds = UInt64(ms) }
        }
        return config
    }

    /// The password for AUTH: systemd's `redis-password` credential, else
    /// `password_file` (its first line). Nil when neither is set.
    public func password() throws(ConfigError) -> String? {
        try Self.secret(file: passwordFile, credential: "redis-password", key: "fleet.password_file", what: "Redis password")
    }

    /// The sentinels' password (AUTH to each sentinel): systemd's
    /// `sentinel-password` credential, else `sentinel_password_file`.
    public func sentinelPassword() throws(ConfigError) -> String? {
        guard followsSentinel else { return nil }
        return try Self.secret(file: sentinelPasswordFile, credential: "sentinel-password", key: "fleet.sentinel_password_file",
                               what: "sentinels' password")
    }

    private static func secret(file: String?, credential: String, key: String, what: String) throws(ConfigError) -> String? {
        var file = file
        if let credentials = environmentValue("CREDENTIALS_DIRECTORY"),
           FileManager.default.fileExists(atPath: credentials + "/" + credential) {
            file = credentials + "/" + credential
        }
        guard let file else { return nil }
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
            throw ConfigError(file: file, line: nil, key: key, message: "cannot read the \(what) file")
        }
        let password = text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard !password.isEmpty else {
            throw ConfigError(file: file, line: nil, key: key, message: "the \(what) file is empty")
        }
        return password
    }

    /// A warning when `password_file` may be read by users other than its
    /// owner and group, or written by its group (mode wider than 0640), as
    /// ssh warns of a private key; nil when fine or unknown.
    public func passwordFileWarning() -> String? {
        guard let file = passwordFile else { return nil }
        var info = stat()
        guard stat(file, &info) == 0 else { return nil }
        let mode = info.st_mode & 0o777
        guard mode & 0o027 != 0 else { return nil }
        return "fleet.password_file \(file) has mode 0\(String(mode, radix: 8)): other users can read the Redis password; "
            + "chmod 600 it (640 to share it with a group)"
    }

    /// Redis reachable from other machines needs a password (as the admin
    /// API needs a token): nil when fine, else the reason to refuse.
    public func refusal(password: String?) -> String? {
        if followsSentinel {
            guard sentinels.contains(where: { !$0.isLocal }), password == nil else { return nil }
            return "[fleet] sentinels are not all on loopback addresses and no Redis password is set; "
                + "set password_file (or the redis-password credential), or use local sentinels"
        }
        guard !address.isLocal, password == nil else { return nil }
        return "[fleet] redis = \(address) is not a loopback address or unix socket and no password is set; "
            + "set password_file (or the redis-password credential), or use a local Redis"
    }
}
