import CacheStorage
import EventLoop
import HTTP1
import Logging
import Telemetry
import Upstream

/// The upstream as one worker's requests reach it: the transfers (libcurl,
/// or a stand-in in ProxyTests), the settings of the moment, the worker's
/// loop, counters and logger, and the fetches that go on with no client
/// waiting (background refreshes and range fills, fetches whose client
/// left). Exchanges and fetches are given this, not the worker.
final class UpstreamAccess {
    let requester: any UpstreamRequester
    /// Unsafe, and safe: the worker owns the loop, this and every fetch.
    unowned(unsafe) let loop: EventLoop
    unowned(unsafe) let cache: CacheAccess
    let counters: WorkerStats
    let stats: ProxyStats
    let logger: Logger
    /// Read on the worker's thread only; `configure` replaces it there.
    private(set) var configuration: ProxyConfiguration
    /// Set when the worker drains: no new background fetch starts.
    var draining = false
    /// Uploads still coming from their clients that hold upstream connections.
    let uploads = UploadShare()

    init(requester: any UpstreamRequester, loop: EventLoop, cache: CacheAccess, stats: ProxyStats, counters: WorkerStats,
         logger: Logger, configuration: ProxyConfiguration) {
        self.requester = requester
        self.loop = loop
        self.cache = cache
        self.stats = stats
        self.counters = counters
        self.logger = logger
        self.configuration = configuration
    }

    /// New settings (SIGHUP), on the worker's thread.
    func configure(_ configuration: ProxyConfiguration) {
        self.configuration = configuration
        requester.settings = configuration.upstream
    }

    // MARK: fetches with no client waiting

    /// Background revalidations in flight on this worker, by key: at most one each.
    private var refreshing: [String: BackgroundRefresh] = [:]

    /// Starts a background revalidation of `entry` unless one is running.
    /// `body`: a body-keyed query's, sent with it.
    func revalidateInBackground(_ entry: CachedResponse, among variants: Variants, request: RequestHead, body: [UInt8]?, peer: String) {
        // Held until the upstream answers: their own blocks (see `CachedResponse.owned`).
        fetchInBackground(entry.key, validating: entry.owned(), among: variants.owned(), request: request, body: body, peer: peer)
    }

    /// A range of a response not stored whole was fetched for a client:
    /// the whole is fetched too, with no client waiting, so that later
    /// ranges are hits (one fetch per key across the workers).
    func fetchWholeInBackground(_ key: String, among variants: Variants, request: RequestHead, peer: String) {
        fetchInBackground(key, validating: nil, among: variants.owned(), request: request, peer: peer)
    }

    private func fetchInBackground(_ key: String, validating entry: CachedResponse?, among variants: Variants,
                                   request: RequestHead, body: [UInt8]? = nil, peer: String) {
        // One background fetch per key across all workers.
        guard refreshing[key] == nil, !draining, cache.lock.beginRefresh(key) else { return }
        let refresh = BackgroundRefresh(upstream: self, key: key, validating: entry, variants: variants, request: request,
                                        body: body) {
            [weak self] in
            self?.cache.lock.endRefresh(key)
            // Deferred: the refresh is still on the stack when it finishes.
            self?.loop.execute { self?.refreshing[key] = nil }
        }
        refreshing[key] = refresh
        if entry == nil { WorkerStats.bump(counters.rangeFills) } else { WorkerStats.bump(counters.backgroundRefreshes) }
        refresh.start(peer: peer)
    }

    /// Fetches whose client left while their response is still being
    /// stored or shared; held here until they finish.
    private var orphans: [ObjectIdentifier: UpstreamFetch] = [:]

    func adopt(_ fetch: UpstreamFetch) { orphans[ObjectIdentifier(fetch)] = fetch }

    /// Deferred: the fetch is still on the stack when it lets go. (Most
    /// fetches end with their client and were never held.)
    func release(_ fetch: UpstreamFetch) {
        let id = ObjectIdentifier(fetch)
        guard !orphans.isEmpty, orphans[id] != nil else { return }
        loop.execute { [weak self] in self?.orphans[id] = nil }
    }
}
