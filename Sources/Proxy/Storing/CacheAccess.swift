import CacheStorage
import Clocks
import EventLoop
import Routing
import Telemetry

/// The cache as one worker's requests use it: the store (its tiers, its
/// copies of hits, the fleet's shared stage), the cache lock (the
/// collapser every worker shares, and the fleet's claim), the clock, the
/// stored bodies known not to decode, and the rules that turn an upstream
/// response into a stored one. Exchanges, fetches
/// and background refreshes are given this, not the worker; what an
/// upstream response does to it is `ResponseStoring`'s extension.
final class CacheAccess {
    let store: WorkerStore
    /// The store's No-Vary-Search paths, this worker's copy (read by every
    /// lookup: one hop, no lock).
    let searchVariances: SearchVarianceReader
    /// A key's one fetch, here and across the fleet.
    let lock: CacheLock
    let clock: WallClock
    /// Stored gzip bodies found not decodable (`Exchange+Decoding`).
    let undecodable = UndecodableBodies.shared
    /// The worker's counters (stored, revalidations).
    let counters: WorkerStats
    /// Read on the worker's thread only; `configure` replaces them there.
    private(set) var builder: StoredResponseBuilder
    /// Where Location and Content-Location may point to be invalidated
    /// (the upstream's origin), and how a URL becomes a key (the routes).
    private(set) var upstreamOrigin: (authority: String, pathPrefix: String)
    private(set) var routes: RouteTable

    /// The worker's loop (where the I/O threads hand results back). The
    /// worker owns both: unowned, as every part it gives its loop.
    unowned(unsafe) let loop: EventLoop

    init(store: TieredStore, collapser: Collapser, clock: WallClock, counters: WorkerStats, configuration: ProxyConfiguration,
         loop: EventLoop) {
        self.loop = loop
        self.store = WorkerStore(tiers: store)
        searchVariances = SearchVarianceReader(store.searchVariances)
        lock = CacheLock(collapser: collapser, store: self.store)
        self.clock = clock
        self.counters = counters
        builder = StoredResponseBuilder(configuration)
        upstreamOrigin = configuration.upstreamOrigin
        routes = configuration.routes
    }

    /// New settings (SIGHUP), on the worker's thread.
    func configure(_ configuration: ProxyConfiguration) {
        builder = StoredResponseBuilder(configuration)
        upstreamOrigin = configuration.upstreamOrigin
        routes = configuration.routes
    }
}
