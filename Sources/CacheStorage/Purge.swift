/// What a purge removes (or, soft, marks stale): one cache key, every key
/// under a path prefix, every response carrying a tag, or everything.
public enum PurgeScope: Sendable, Equatable, CustomStringConvertible {
    case key(String)
    case prefix(String)
    case tag(String)
    /// Every key whose target (path and query) matches.
    case regex(PurgePattern)
    case all

    public func matches(key: String, tags: [String]) -> Bool {
        switch self {
        case .key(let k): return key == k
        case .prefix(let p): return key.hasPrefix(p)
        case .tag(let t): return tags.contains(t)
        case .regex(let pattern): return pattern.matches(key: key)
        case .all: return true
        }
    }

    public var description: String {
        switch self {
        case .key(let k): return "url \(k)"
        case .prefix(let p): return "prefix \(p)"
        case .tag(let t): return PurgeTags.groupDescription(t) ?? "tag \(t)"
        case .regex(let pattern): return "regex \(pattern)"
        case .all: return "everything"
        }
    }
}

/// Whether a response fetched (or queued for writing) before some purges
/// may still be stored.
enum StoreVerdict: Equatable {
    case store
    /// Only soft purges matched: store it, marked stale.
    case storeStale
    /// A purge removed its key or tags meanwhile.
    case refuse
}

/// Recent purges, numbered, so that a fetch which started before a purge
/// cannot store its (now outdated) response after it: the fetch remembers
/// the number current when it began and asks here when it completes.
struct PurgeLog: ~Copyable {
    typealias Verdict = StoreVerdict

    private var entries: [(number: UInt64, scope: PurgeScope, soft: Bool)] = []
    private(set) var latest: UInt64 = 0
    /// Purges up to this number are forgotten: fetches older than that are
    /// refused outright (rare: more than `capacity` purges during one fetch).
    private var forgottenUpTo: UInt64 = 0
    static let capacity = 4096

    mutating func record(_ scope: PurgeScope, soft: Bool) -> UInt64 {
        record(scope, soft: soft, number: latest + 1)
    }

    /// Records a purge under a number given by the caller (the disk tier
    /// numbers purges and queued writes from one sequence).
    @discardableResult
    mutating func record(_ scope: PurgeScope, soft: Bool, number: UInt64) -> UInt64 {
        latest = number
        entries.append((number, scope, soft))
        if entries.count > Self.capacity {
            let drop = entries.count - Self.capacity
            forgottenUpTo = entries[drop - 1].number
            entries.removeFirst(drop)
        }
        return number
    }

    /// Forgets every purge: for when nothing older is in flight.
    mutating func removeAll() { entries.removeAll() }

    /// Whether a response fetched since purge number `since` may be stored:
    /// refused when a later purge removed its key or tags, stored stale when
    /// only soft purges matched.
    func verdict(key: String, tags: [String], since: UInt64) -> Verdict {
        guard since < latest else { return .store }
        guard since >= forgottenUpTo else { return .refuse }
        var verdict = Verdict.store
        for entry in entries.reversed() {
            if entry.number <= since { break }
            guard entry.scope.matches(key: key, tags: tags) else { continue }
            if !entry.soft { return .refuse }
            verdict = .storeStale
        }
        return verdict
    }
}

/// Tags from a response's `Surrogate-Key` (space-separated) and `Cache-Tag`
/// (comma-separated) fields plus a route's own, sorted without duplicates.
public enum PurgeTags {
    /// Tags longer than this, or more than `maxCount` of them, are dropped:
    /// they live in memory indexes and every disk file.
    public static let maxLength = 256
    public static let maxCount = 64

    /// `groupOrigin`: where `groups` come from (`group(_:origin:)`); each
    /// group is then two tags, its name and its origin's form of it.
    public static func from(surrogateKey: [String], cacheTag: [String], groups: [String] = [], groupOrigin: String = "",
                            route: [String] = []) -> [String] {
        var tags = Set(route)
        for group in groups where group.utf8.count <= maxLength {
            tags.insert(group)
            tags.insert(Self.group(group, origin: groupOrigin))
        }
        for value in surrogateKey {
            for tag in value.split(whereSeparator: { $0 == " " || $0 == "\t" }) where tag.utf8.count <= maxLength {
                tags.insert(String(tag))
            }
        }
        for value in cacheTag {
            for tag in value.split(separator: ",") {
                let trimmed = trim(tag)
                if !trimmed.isEmpty && trimmed.utf8.count <= maxLength { tags.insert(trimmed) }
            }
        }
        return Array(tags.sorted().prefix(maxCount))
    }

    /// The tag a Cache-Groups group (RFC 9875) carries for one origin:
    /// what Cache-Group-Invalidation purges, so that it reaches that
    /// origin's responses alone (section 2.1), and no Surrogate-Key or
    /// route tag of the same name. `origin`: the upstream's name and, with
    /// virtual hosts, the host. Unit separators keep it apart from any tag
    /// a field can name (field values hold no control characters).
    public static func group(_ name: String, origin: String) -> String {
        groupMark + origin + "\u{1F}" + name
    }

    private static let groupMark = "\u{1F}group\u{1F}"

    /// How logs show a group's tag: `cache group "name" of origin`.
    static func groupDescription(_ tag: String) -> String? {
        guard tag.hasPrefix(groupMark) else { return nil }
        let rest = tag.dropFirst(groupMark.count)
        guard let separator = rest.firstIndex(of: "\u{1F}") else { return nil }
        let origin = rest[..<separator].isEmpty ? "" : " of \(rest[..<separator])"
        return "cache group \"\(rest[rest.index(after: separator)...])\"" + origin
    }

    private static func trim(_ s: Substring) -> String {
        var s = s
        while let c = s.first, c == " " || c == "\t" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" { s.removeLast() }
        return String(s)
    }
}

/// Scopes purged so far, matched in constant time per key and tag (a
/// start-up rebuild asks for every file it finds).
struct PurgedScopes {
    private var keys: Set<String> = []
    private var tags: Set<String> = []
    private var prefixes: [String] = []
    private var patterns: [PurgePattern] = []
    private var all = false

    var isEmpty: Bool { !all && keys.isEmpty && tags.isEmpty && prefixes.isEmpty && patterns.isEmpty }

    mutating func add(_ scope: PurgeScope) {
        switch scope {
        case .key(let key): keys.insert(key)
        case .tag(let tag): tags.insert(tag)
        case .prefix(let prefix): prefixes.append(prefix)
        case .regex(let pattern): patterns.append(pattern)
        case .all: all = true
        }
    }

    func matches(key: String, tags: [String]) -> Bool {
        guard !isEmpty else { return false }
        return all || keys.contains(key) || tags.contains(where: self.tags.contains) || prefixes.contains(where: key.hasPrefix)
            || patterns.contains { $0.matches(key: key) }
    }
}
