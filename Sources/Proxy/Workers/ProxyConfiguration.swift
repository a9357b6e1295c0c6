import Compression
import CacheSemantics
import CacheStorage
import EdgeControls
import HTTP1
import Routing
import Upstream

/// Everything a worker needs to know, fixed at start-up.
public struct ProxyConfiguration: Sendable {
    /// Upstream base URL without a trailing slash, e.g. "http://127.0.0.1:9000".
    public var upstreamBase: String
    public var limits = ParseLimits()
    /// Responses whose body is larger are streamed through and not stored.
    public var maxObjectBytes = 8 << 20
    /// RFC 9111 shared-cache rules (true) or a single user's private cache.
    public var sharedCache = true
    /// Whether responses carrying Set-Cookie may be stored (RFC 9111 allows
    /// it; nginx and Varnish refuse by default). When false they are
    /// neither stored nor shared with collapsed requests.
    public var storeSetCookie = false
    /// Send the client's Host upstream as X-Forwarded-Host. A response may
    /// then depend on it, so the Host becomes part of the cache key.
    public var forwardHost = false
    /// Send the client's Host upstream as Host (virtual hosts behind one
    /// upstream); stored responses are then keyed by it, as with `forwardHost`.
    public var preserveHost = false
    /// Request fields normally dropped towards the upstream
    /// (`UpstreamHeaders.isOverride`) that go along; they key responses.
    public var passRequestHeaders: [String] = []
    /// The targeted cache-control field (RFC 9213) meant for Larder; it and
    /// CDN-Cache-Control take precedence over Cache-Control and are not
    /// passed on to clients.
    public var targetedCacheControl = "Larder-Cache-Control"
    /// The policy of requests that do not choose one (or may not).
    public var defaultPolicy: RequestPolicy = .useProtocolCachePolicy
    /// Whether clients may choose a policy with Larder-Cache-Policy.
    public var allowClientPolicy = true
    /// Remove Surrogate-Key and Cache-Tag (purge tags) from responses before
    /// clients see them.
    public var stripTagHeaders = true
    /// Whether targeted cache-control fields (RFC 9213) are removed before
    /// clients see them (default: passed on, for caches further down).
    public var stripTargetedFields = false
    /// RFC 9111 section 4.2.4 ("disconnected"), Varnish's grace: how stale
    /// (seconds) a stored response may be served when the upstream cannot
    /// be reached at all, unless its directives forbid it (0: off).
    public var staleOnDisconnectSeconds = 3600
    /// How long a request with a stale copy that may stand in for a failed
    /// upstream waits for the upstream's head before it is served that copy
    /// (`detail=upstream-slow`; the fetch goes on and stores). 0: off.
    public var staleTimeoutMilliseconds = 3000
    /// Varnish's grace: for this long past expiry (seconds) a stored
    /// response is served at once while one background revalidation runs.
    public var graceSeconds = 0
    /// Upgrade requests (WebSocket) are tunnelled to the upstream; false: 501.
    public var websocket = true
    /// `compress`: uncompressed responses of these media types are stored
    /// gzip encoded (empty: off, the default). Routes may override it.
    public var compressTypes = MediaTypePatterns()
    /// `compress_codec`: the coding those copies are stored in (`gzip`, the
    /// default; `zstd`; `br`).
    public var compressCodec = Codec.gzip
    /// A range of a response not stored whole: the whole is fetched in the
    /// background too (when it fits the tiers), so later ranges are hits.
    /// false: only the ranges clients ask for are fetched (and stored).
    public var rangeFill = true
    /// Retries of idempotent, bodiless requests whose upstream connection
    /// failed before any response byte arrived.
    public var upstreamRetries = 2
    /// When a client disconnects from a storable response of at most this
    /// many bytes (Content-Length, or what has arrived), the fetch goes on
    /// and the response is stored (0: the fetch is abandoned).
    public var finishStoreLimitBytes = 8 << 20
    /// `[[route]]` rules by path prefix.
    public var routes = RouteTable()
    /// The edge controls of requests under no route (a route's are in its `rules`).
    public var edge: EdgeRules?
    /// `trusted_proxies`: peers whose X-Forwarded-For / Forwarded name the client.
    public var trustedProxies: AddressList?
    /// A connection waiting for its next request is closed after this long.
    public var keepAliveTimeoutMilliseconds: UInt64 = 60_000
    /// A client must send a complete request head within this long.
    public var headerTimeoutMilliseconds: UInt64 = 15_000
    /// A TLS client must finish its handshake within this long (slow or
    /// stalled handshakes hold a connection and a worker's memory).
    public var handshakeTimeoutMilliseconds: UInt64 = 10_000
    /// Requests an HTTP/2 client may have open at once on a connection.
    public var http2MaxConcurrentStreams = 100
    /// HTTP/3: past this many QUIC handshakes pending on a worker, a new
    /// client is sent a Retry first (its address proved before any state is kept).
    public var quicRetryAbove = 64
    /// A request body that makes no progress for this long gets 408 (or,
    /// once the answer has started, the connection closed).
    public var bodyTimeoutMilliseconds: UInt64 = 30_000
    /// Pipelined request bytes buffered per connection while one request is
    /// in flight; beyond it Larder stops reading until the answers catch up.
    public var pipelineBufferBytes = 256 * 1024
    /// Open client connections, all workers together (one shared count: the
    /// kernel spreads connections over the workers unevenly); more are
    /// answered 503 and closed.
    public var maxConnections = 10_000
    /// Request bodies up to this size are received whole before the
    /// upstream request starts (0: every body streams as it arrives).
    public var requestBufferBytes = 1 << 20
    /// What every worker's held request bodies may take together; beyond
    /// it, bodies stream as larger ones do.
    public var requestBufferTotalBytes = 256 << 20
    /// A client that takes none of its queued output for this long is disconnected.
    public var sendTimeoutMilliseconds: UInt64 = 60_000
    /// Output buffered for one client beyond which the upstream is paused
    /// and no further pipelined request is answered.
    public var clientBufferBytes = 1 << 20
    public var upstream = UpstreamSettings()

    /// The upstream's "host:port" and path prefix, split from `upstreamBase`.
    public var upstreamOrigin: (authority: String, pathPrefix: String) {
        let afterScheme = upstreamBase.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        // "http:", "", "host:port", "prefix..."
        let authority = afterScheme.count > 2 ? String(afterScheme[2]) : ""
        let prefix = afterScheme.count > 3 ? "/" + afterScheme[3] : ""
        return (authority, prefix)
    }

    public init(upstreamBase: String) {
        self.upstreamBase = ""
        upstreams = UpstreamPools(defaultPool: UpstreamPool(name: "default", servers: ["http://127.0.0.1:1"]))
        setUpstreamBase(upstreamBase)
    }

    /// The upstream base URL, without trailing slashes; the default pool
    /// becomes that one server.
    public mutating func setUpstreamBase(_ url: String) {
        upstreamBase = Self.trimmed(url)
        upstreams = UpstreamPools(defaultPool: UpstreamPool(name: "default", servers: [upstreamBase.isEmpty ? "http://127.0.0.1:1" : upstreamBase]))
    }

    static func trimmed(_ url: String) -> String {
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        return base
    }

    /// The upstream pools: one reference (the configuration is copied on
    /// every request; two more counted fields cost each copy).
    public var upstreams: UpstreamPools

    /// The pool a route names (nil, or unknown: the default).
    public func pool(named name: String?) -> UpstreamPool { upstreams.pool(named: name) }

    /// Every pool, the default first (for /stats and /metrics).
    public var allPools: [UpstreamPool] { upstreams.all }
}
