/// How one fetch's response gets into the store (as Pingora's miss
/// handler): made when the request goes upstream, it carries what must
/// hold from then until the response is stored, so that nothing above the
/// storage names any of it: the purge order (a purge published meanwhile
/// that matches keeps the response out, or stores it stale), the fleet's
/// mark (the same for the shared tier), and which tiers take it (a route
/// with `disk = false`: the first alone). Every store of the fetch's
/// response goes through it: the body as it arrives (`writer`, which offers
/// what it committed to the fleet), a head refreshed by a 304, a copy
/// recoded later (`insert`). A value; used on its worker's thread.
public struct MissHandler {
    private let store: WorkerStore
    /// The store's purge number when the fetch began.
    private let since: UInt64
    /// The fleet's purge mark then (nil: no fleet, or unreachable).
    private let mark: SharedMark?
    private let firstTierOnly: Bool

    init(store: WorkerStore, toDisk: Bool) {
        self.store = store
        since = store.tiers.fetchToken
        mark = store.shared?.fetchMark()
        firstTierOnly = !toDisk
    }

    /// The largest body the tiers it stores in keep.
    public var largestBody: Int { StoreWriter.largestBody(in: store.tiers, firstTierOnly: firstTierOnly) }

    /// A writer for the response `head` describes, its body to come
    /// (`expectedLength` when the upstream said it); `finish` stores it.
    /// `abandoned` at once when no tier would keep it, or a purge won.
    public func writer(_ head: StoredHead, storedAt: Int64, expectedLength: Int?) -> StoreWriter {
        StoreWriter(head, through: self, into: store.tiers, fetchedSince: since, storedAt: storedAt, firstTierOnly: firstTierOnly,
                    expectedLength: expectedLength, keepStreamedUpTo: store.sharedMaxObjectBytes)
    }

    /// Stores a whole response of this fetch (a refreshed head, a copy
    /// recoded) in the tiers it goes to, unless a purge since the fetch
    /// began matches it; true when a tier took it.
    @discardableResult
    public func insert(_ entry: CachedResponse) -> Bool {
        store.tiers.insert(entry, firstTierOnly: firstTierOnly, fetchedSince: since)
    }

    /// Offers a response this fetch stored locally to the fleet's shared
    /// tier (none, or a purge the fleet published since: not offered).
    public func share(_ entry: CachedResponse) { store.share(entry, fetchedAt: mark) }
}

extension WorkerStore {
    /// The miss handler of a fetch beginning now (`toDisk`: the route keeps
    /// responses on disk too).
    public func missHandler(toDisk: Bool) -> MissHandler { MissHandler(store: self, toDisk: toDisk) }
}
