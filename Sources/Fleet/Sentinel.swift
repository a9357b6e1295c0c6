import Redis

/// What Redis Sentinel says, read as values: the master's address
/// (`SENTINEL get-master-addr-by-name`) and a failover's announcement
/// (`+switch-master` on a sentinel's Pub/Sub).
public enum Sentinel {
    /// The channel a sentinel announces each failover on.
    public static let switchChannel = "+switch-master"

    /// The reply to `SENTINEL get-master-addr-by-name NAME`: `[ip, port]`;
    /// nil when the sentinel does not monitor that name (a null reply), or
    /// for anything else.
    public static func masterAddress(_ reply: RedisReply) -> RedisAddress? {
        let parts = reply.elements
        guard parts.count == 2, let host = parts[0].text, !host.isEmpty, let port = parts[1].text.flatMap({ Int($0) }),
              (1...65535).contains(port) else { return nil }
        return RedisAddress(endpoint: .tcp(host: host, port: port))
    }

    /// A `+switch-master` message: "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT".
    /// The new master when the message is about `master`; nil otherwise.
    public static func switched(_ payload: [UInt8], master: String) -> RedisAddress? {
        let words = payload.split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
        guard words.count == 5, words[0] == master, let port = Int(words[4]), (1...65535).contains(port) else { return nil }
        return RedisAddress(endpoint: .tcp(host: words[3], port: port))
    }
}
