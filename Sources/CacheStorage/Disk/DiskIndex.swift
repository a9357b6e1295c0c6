import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The in-memory index of the disk tier. Guarded by the tier's mutex.
struct DiskIndex: ~Copyable {
    struct Item {
        var bytes: Int
        var lastUse: UInt64
        var storedAt: Int64
        /// A large file's checksum was checked since start.
        var verified = false
        var tags: [String] = []
    }

    var entries: [String: [String: Item]] = [:]
    var totalBytes = 0
    var count = 0
    var clock: UInt64 = 0
    var rebuilt = false
    var evictions = 0
    /// Sequence numbers: a remove after a queued write wins over it.
    var sequence: UInt64 = 0
    var tombstones: [String: UInt64] = [:]
    /// Purges, numbered from `sequence`: a write queued before one of them
    /// is dropped (or, soft, marked stale).
    var purges = PurgeLog()
    /// tag → keys with a file carrying it.
    var tagged: [String: Set<String>] = [:]

    init() {}

    mutating func put(key: String, name: String, bytes: Int, storedAt: Int64, tags: [String]) {
        remove(key: key, name: name)
        clock += 1
        add(key: key, name: name, Item(bytes: bytes, lastUse: clock, storedAt: storedAt, tags: tags))
    }

    mutating func insertIfAbsent(key: String, name: String, bytes: Int, storedAt: Int64, tags: [String]) {
        guard entries[key]?[name] == nil, (tombstones[key] ?? 0) == 0 else { return }
        // Entries found on disk are older than anything used since start.
        add(key: key, name: name, Item(bytes: bytes, lastUse: 0, storedAt: storedAt, tags: tags))
    }

    private mutating func add(key: String, name: String, _ item: Item) {
        entries[key, default: [:]][name] = item
        totalBytes += item.bytes
        count += 1
        for tag in item.tags { tagged[tag, default: []].insert(key) }
    }

    mutating func remove(key: String, name: String) {
        guard let item = entries[key]?.removeValue(forKey: name) else { return }
        let keyGone = entries[key]?.isEmpty == true
        if keyGone { entries[key] = nil }
        totalBytes -= item.bytes
        count -= 1
        for tag in item.tags {
            // Another variant of the key may still carry the tag.
            if !keyGone, entries[key]!.values.contains(where: { $0.tags.contains(tag) }) { continue }
            tagged[tag]?.remove(key)
            if tagged[tag]?.isEmpty == true { tagged[tag] = nil }
        }
    }

    /// Whether a write numbered `seq` of `key` with `tags` lost to a later
    /// removal or purge.
    func verdict(key: String, tags: [String], seq: UInt64) -> StoreVerdict {
        if (tombstones[key] ?? 0) > seq { return .refuse }
        return purges.verdict(key: key, tags: tags, since: seq)
    }

    /// The files `scope` matches.
    func files(matching scope: PurgeScope) -> [(key: String, name: String)] {
        let keys: [String]
        switch scope {
        case .key(let key): keys = entries[key] == nil ? [] : [key]
        case .tag(let tag): keys = tagged[tag].map(Array.init) ?? []
        case .prefix(let prefix): keys = entries.keys.filter { $0.hasPrefix(prefix) }
        case .all: keys = Array(entries.keys)
        }
        var files: [(key: String, name: String)] = []
        for key in keys {
            for (name, item) in entries[key] ?? [:] where scope.matches(key: key, tags: item.tags) { files.append((key, name)) }
        }
        return files
    }

    /// Removes entries older than their key's lifetime; returns their files.
    mutating func removeExpired(now: Int64, lifetime: (String) -> Int?) -> [(String, String)] {
        var expired: [(String, String)] = []
        for (key, files) in entries {
            guard let seconds = lifetime(key) else { continue }
            for (name, item) in files where now - item.storedAt > Int64(seconds) { expired.append((key, name)) }
        }
        for (key, name) in expired { remove(key: key, name: name) }
        return expired
    }

    /// Approximate LRU: past the limit, drop the least recently used (then
    /// oldest stored) until 95 % of the limit. Returns the files to delete.
    mutating func evict(limit: Int) -> [(String, String)] {
        guard totalBytes > limit else { return [] }
        var all: [(key: String, name: String, item: Item)] = []
        all.reserveCapacity(count)
        for (key, files) in entries { for (name, item) in files { all.append((key, name, item)) } }
        all.sort { ($0.item.lastUse, $0.item.storedAt) < ($1.item.lastUse, $1.item.storedAt) }
        var victims: [(String, String)] = []
        let target = limit / 100 * 95
        for victim in all where totalBytes > target {
            remove(key: victim.key, name: victim.name)
            victims.append((victim.key, victim.name))
            evictions += 1
        }
        return victims
    }
}
