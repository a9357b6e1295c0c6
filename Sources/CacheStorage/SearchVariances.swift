import CacheSemantics
import Synchronization

/// The paths whose responses said No-Vary-Search, with what it said
/// (`SearchVariance`), shared by the workers. A request for such a path is
/// looked up, and its response stored, under the key its query has in
/// canonical form, so every query the field makes equivalent finds the
/// same entry with one lookup. A path's latest response decides: one
/// without the field (or with an invalid one) takes the path out again.
///
/// Bounded (`limit` paths): beyond it a new path is not recorded and its
/// responses are keyed by their whole query, as without the field (nothing
/// wrong is served; fewer requests share an entry). Not persisted: after a
/// restart a path's first response teaches it again.
public final class SearchVariances: Sendable {
    public static let defaultLimit = 10_000
    private let limit: Int
    /// Read first by every lookup: no lock while no path has a variance
    /// (inlined into the request's path: a call there cost a hit 1 %).
    @usableFromInline let count = Atomic<Int>(0)
    /// Bumped on every change: a worker's `SearchVarianceReader` copies the
    /// table again then, and reads its copy without a lock otherwise.
    let changes = Atomic<UInt64>(0)
    private let paths = Mutex<[String: SearchVariance]>([:])

    public init(limit: Int = SearchVariances.defaultLimit) { self.limit = limit }

    @inlinable
    public var isEmpty: Bool { count.load(ordering: .relaxed) == 0 }

    /// The key to look `key` up under: its query in canonical form when its
    /// path has a variance (nil: the key as it is). Takes the lock: a
    /// worker's requests ask its `SearchVarianceReader`.
    public func lookupKey(_ key: String) -> String? {
        guard !isEmpty else { return nil }
        return Self.canonical(key) { path in paths.withLock { $0[path] } }
    }

    /// The paths and the change they are as of.
    func snapshot() -> (changes: UInt64, paths: [String: SearchVariance]) {
        paths.withLock { (changes.load(ordering: .relaxed), $0) }
    }

    /// Under the lock: a path's variance set (nil: removed), counted as a
    /// change only when it is one (a path's every response says it again).
    private func change(_ paths: inout [String: SearchVariance], _ path: String, to variance: SearchVariance?) {
        guard paths[path] != variance else { return }
        paths[path] = variance
        count.store(paths.count, ordering: .relaxed)
        changes.add(1, ordering: .releasing)
    }

    static func canonical(_ key: String, variance: (String) -> SearchVariance?) -> String? {
        let parts = split(key)
        return variance(parts.path).map { Self.key(parts, $0) }
    }

    /// The key a response to a request for `key` (its whole query) is
    /// stored under, given the response's No-Vary-Search `field`; the path
    /// is recorded, or taken out, as the field says.
    public func storeKey(_ key: String, field: String?) -> String {
        let variance = SearchVariance(field: field)
        let parts = Self.split(key)
        guard !variance.isStandard else {
            if !isEmpty { paths.withLock { change(&$0, parts.path, to: nil) } }
            return key
        }
        let recorded = paths.withLock { paths -> Bool in
            guard paths[parts.path] != nil || paths.count < limit else { return false }
            change(&paths, parts.path, to: variance)
            return true
        }
        return recorded ? Self.key(parts, variance) : key
    }

    /// A purge of URLs: each key's canonical form with it (the entry a
    /// No-Vary-Search response is stored under).
    public func withCanonicalKeys(_ scopes: [PurgeScope]) -> [PurgeScope] {
        guard !isEmpty else { return scopes }
        var all = scopes
        for case .key(let key) in scopes {
            if let canonical = lookupKey(key), !all.contains(.key(canonical)) { all.append(.key(canonical)) }
        }
        return all
    }

    /// The paths recorded (statistics, tests).
    public var recorded: Int { count.load(ordering: .relaxed) }

    /// A key's path (with the host a virtual-hosts key ends with, after a
    /// space) and its query.
    static func split(_ key: String) -> (path: String, query: Substring, host: Substring) {
        var target = Substring(key), host: Substring = ""
        if let space = key.firstIndex(of: " ") { (target, host) = (key[..<space], key[space...]) }
        guard let mark = target.firstIndex(of: "?") else { return (String(target) + host, "", host) }
        return (String(target[..<mark]) + host, target[target.index(after: mark)...], host)
    }

    private static func key(_ parts: (path: String, query: Substring, host: Substring), _ variance: SearchVariance) -> String {
        let query = variance.canonicalQuery(parts.query)
        let path = parts.path.dropLast(parts.host.count)
        return path + (query.isEmpty ? "" : "?" + query) + parts.host
    }
}

/// A worker's copy of `SearchVariances`: its requests look their keys up
/// without a lock (one atomic load while the table is empty or unchanged;
/// a fresh copy after a change). Used on its worker's thread only.
public final class SearchVarianceReader {
    @usableFromInline let table: SearchVariances
    private var seen: UInt64 = 0
    private var paths: [String: SearchVariance] = [:]

    public init(_ table: SearchVariances) { self.table = table }

    /// As `SearchVariances.lookupKey`.
    @inlinable
    public func lookupKey(_ key: String) -> String? {
        guard !table.isEmpty else { return nil }
        return canonical(key)
    }

    @usableFromInline
    func canonical(_ key: String) -> String? {
        if table.changes.load(ordering: .acquiring) != seen { (seen, paths) = table.snapshot() }
        return SearchVariances.canonical(key) { paths[$0] }
    }
}
