import CacheStorage

/// A lookup in the fleet's shared tier once the local tiers missed
/// (memory -> disk -> fleet -> upstream): what it finds is stored in the
/// local tiers, unless a purge applied here since the lookup began.
enum SharedLookup {
    /// Asks `tier` for `key`; true when asked: `found` then runs once, on
    /// the worker's loop, with what was promoted (empty: nothing). False
    /// (Redis unreachable): nothing runs, and the caller goes on at once.
    static func ask(_ tier: any SharedTier, key: String, into store: TieredStore, toDisk: Bool,
                    found: @escaping (Variants) -> Void) -> Bool {
        let since = store.fetchToken
        return tier.lookup(key) { variants in
            found(Variants(variants.filter { store.insert($0, firstTierOnly: !toDisk, fetchedSince: since) }))
        }
    }
}
