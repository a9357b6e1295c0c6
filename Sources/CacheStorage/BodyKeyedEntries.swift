import Synchronization

/// Whether this process may hold responses keyed by a request body (a
/// QUERY's, a cached POST's: their keys hold a line feed). Until one is
/// stored or found on disk at start, an unsafe request's invalidation need
/// not purge the URL's query tag: a purge per write would churn the purge
/// log, which in-flight stores are checked against. Only ever set.
public enum BodyKeyedEntries {
    private static let seen = Atomic<Bool>(false)

    public static var mayBeStored: Bool { seen.load(ordering: .relaxed) }

    /// Called with each key stored or found; cheap when already set.
    @inline(__always)
    public static func note(_ key: String) {
        guard !seen.load(ordering: .relaxed), key.utf8.contains(0x0A) else { return }
        seen.store(true, ordering: .relaxed)
    }
}
