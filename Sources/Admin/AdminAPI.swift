import Bytes
import CacheStorage
import EventLoop
import Telemetry
import HTTP1
import HTTPHeaders
import Upstream

/// The admin endpoints (docs/admin-and-purging.md's table): a request in, an
/// answer out. No sockets here, so every endpoint is testable directly.
/// Runs on the admin thread only (the metrics registry keeps scrape state).
public final class AdminAPI {
    public struct Response {
        public var status: Int
        public var contentType: String
        public var body: String
        public var extraHeaders: HeaderFields = []
        /// Set when the final answer comes later (a purge waiting for the
        /// fleet): called once with a function taking that answer, which
        /// may be called on any thread.
        public var later: ((@escaping (Response) -> Void) -> Void)?
        /// Set for `GET /log?follow=1`: the connection becomes a stream of
        /// the requests this filter admits (one JSON object per line).
        public var follow: LogFilter?

        static func json(_ status: Int, _ body: String) -> Response {
            Response(status: status, contentType: "application/json", body: body + "\n")
        }
        public static func error(_ status: Int, _ message: String) -> Response {
            json(status, "{\"error\": \(JSON.string(message))}")
        }
    }

    private let store: TieredStore
    let stats: ProxyStats
    let token: [UInt8]?
    /// A token for reads only (nil: none); honoured only when `token` is set.
    let readToken: [UInt8]?
    /// /healthz answers without a token.
    let healthzPublic: Bool
    /// The status page's sign-in cookie: drawn at random for this process,
    /// so the cookie is never the token (a copied cookie cannot purge, and
    /// it stops working at a restart).
    let statusSession: [UInt8] = Array((0..<4).map { _ in
        let word = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return String(repeating: "0", count: 16 - word.count) + word
    }.joined().utf8)
    /// The cache key of a request target under the current routes.
    private let purgeScopes: (String) -> [PurgeScope]
    private let startedAt: Int64
    let clock: () -> Int64
    private let metrics: Metrics
    let log: (String) -> Void
    /// The other nodes of a fleet, told of every purge applied here.
    private let fanOut: PurgeFanOut?
    /// The answers the workers sample, and what the admin thread keeps of
    /// them and of the counters over time (the status page, top URLs).
    let samples: RequestSamples?
    let activity = Activity()
    /// Version, node name and upstream, for /stats and the status page.
    private var identity = ("", "", "")
    /// The upstream pools of the configuration in force.
    private let pools: () -> [UpstreamPool]
    /// Set only when the daemon started with LARDER_TEST_CLOCK=1: moves
    /// every clock of the process on by the milliseconds given and wakes
    /// the loops (`POST /debug/clock?advance=SECONDS`), for tests that pass
    /// a lifetime or a timeout without waiting for it.
    public var moveClock: ((Int64) -> Void)?
    /// Cross-site and rebinding requests refused (`AdminRequestGuard`).
    public var requestGuard = AdminRequestGuard()
    /// Where warnings go (failed sign-ins); nil: with the other lines (`log`).
    public var warn: ((String) -> Void)?

    /// Out of descriptors: the store gives back files it keeps open for
    /// disk hits (as for the proxy's accepts); how many.
    public func releaseDescriptors() -> Int { store.releaseDescriptors() }

    public init(store: TieredStore, stats: ProxyStats, token: String?, startedAt: Int64,
                clock: @escaping () -> Int64, purgeScopes: @escaping (String) -> [PurgeScope], fanOut: PurgeFanOut? = nil,
                samples: RequestSamples? = nil, version: String = "", node: String = "", upstream: String = "",
                readToken: String? = nil, healthzPublic: Bool = true, pools: @escaping () -> [UpstreamPool] = { [] },
                log: @escaping (String) -> Void) {
        self.fanOut = fanOut
        self.samples = samples
        self.store = store
        self.stats = stats
        self.token = token.map { Array($0.utf8) }
        self.readToken = readToken.map { Array($0.utf8) }
        self.healthzPublic = healthzPublic
        self.startedAt = startedAt
        self.clock = clock
        self.purgeScopes = purgeScopes
        self.log = log
        metrics = Metrics()
        metrics.version = version
        identity = (version, node, upstream)
        self.pools = pools
        metrics.startedAt = startedAt
    }

    /// Answers one request. `target` is the request target as sent;
    /// `authorization` and `cookie` its fields, if any. The status page's
    /// cookie stands for the token in reads only (GET, HEAD): a page on
    /// another site cannot purge through a browser that holds it.
    public func handle(method: String, target: String, authorization: String?, cookie: String? = nil) -> Response {
        let (path, query) = Self.split(target)
        let reads = method == "GET" || method == "HEAD"
        if reads, path == "/" { return statusPage(query, authorization: authorization, cookie: cookie) }
        if reads, path == "/healthz", healthzPublic { return Response(status: 200, contentType: "text/plain; charset=utf-8", body: "ok\n") }
        // The admin token opens everything; the read token (or the status
        // page's cookie) reads only.
        guard authorized(authorization) || (reads && (authorized(authorization, readOnly: true) || authorized(cookie: cookie))) else {
            var response = Response.error(401, "missing or wrong admin token: send Authorization: Bearer TOKEN")
            response.extraHeaders = ["www-authenticate": "Bearer realm=\"larder\""]
            return response
        }
        if method == "PURGE" {
            // PURGE /path?q: the method form of POST /purge?url=/path?q (the
            // whole target is the URL, so a soft purge needs the POST form).
            return purge(scope: .key(target), soft: false)
        }
        switch path {
        case "/purge": return expect("POST", method) ?? purge(query)
        case "/memory/clear":
            return expect("POST", method) ?? {
                let dropped = store.clearMemory()
                log("admin: memory tier cleared (\(dropped) responses)")
                return .json(200, "{\"dropped\": \(dropped)}")
            }()
        case "/prune": return expect("POST", method) ?? prune(query)
        case "/debug/clock" where moveClock != nil: return expect("POST", method) ?? advanceClock(query)
        case "/stats": return expect("GET", method) ?? .json(200, snapshot().json)
        case "/metrics":
            return expect("GET", method)
                ?? Response(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: metrics.render(snapshot()))
        case "/healthz": return expect("GET", method) ?? Response(status: 200, contentType: "text/plain; charset=utf-8", body: "ok\n")
        case "/log": return expect("GET", method) ?? follow(query)
        case "/top": return expect("GET", method) ?? top(query)
        case "/history": return expect("GET", method) ?? history(query)
        case "/errors": return expect("GET", method) ?? recentErrors()
        case "/status.js":
            return expect("GET", method) ?? Response(status: 200, contentType: "text/javascript; charset=utf-8", body: StatusPage.script)
        case "/": return expect("GET", method)!
        default:
            return .error(404, "no such admin endpoint \(path); see / (the status page), /stats, /metrics, /healthz, /top, "
                          + "/history, /errors, /log, /purge, /memory/clear, /prune")
        }
    }

    /// `GET /log?follow=1&...`: the requests as they happen (the admin
    /// server streams them); `follow=1` is required, the log is no file.
    private func follow(_ query: [(name: String, value: String)]) -> Response {
        guard query.contains(where: { $0.name == "follow" && ($0.value == "1" || $0.value == "true") }) else {
            return .error(400, "add follow=1: /log streams the requests as they happen (larder log --follow)")
        }
        switch LogFilter.parse(query) {
        case .failure(let error): return .error(400, error.message)
        case .success(let filter):
            var response = Response(status: 200, contentType: "application/x-ndjson", body: "")
            response.follow = filter
            return response
        }
    }

    private func expect(_ allowed: String, _ method: String) -> Response? {
        if method == allowed || (allowed == "GET" && method == "HEAD") { return nil }
        var response = Response.error(405, "use \(allowed) here")
        response.extraHeaders = ["allow": allowed]
        return response
    }

    // MARK: auth

    /// Whether an Authorization field carries the admin token (or, with
    /// `readOnly`, the read token).
    func authorized(_ header: String?, readOnly: Bool = false) -> Bool {
        guard let token else { return true }
        guard let header else { return false }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return false }
        return isToken(Array(parts[1].utf8), readOnly: readOnly, admin: token)
    }

    /// `given` is the admin token, or with `readOnly` the read token.
    func isToken(_ given: [UInt8], readOnly: Bool, admin: [UInt8]) -> Bool {
        if readOnly { return readToken.map { Self.constantTimeEqual(given, $0) } ?? false }
        return Self.constantTimeEqual(given, admin)
    }

    /// Compares without stopping at the first difference, so the time taken
    /// does not tell an attacker how much of a guess was right.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt(bitPattern: a.count ^ b.count)
        for i in 0..<max(a.count, b.count) {
            difference |= UInt((i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0))
        }
        return difference == 0
    }

    // MARK: purge and prune

    private func purge(_ query: [(name: String, value: String)]) -> Response {
        let soft: Bool
        switch query.last(where: { $0.name == "soft" })?.value {
        case nil, "false": soft = false
        case "true": soft = true
        default: return .error(400, "soft must be true or false")
        }
        let scopes = query.filter { ["url", "prefix", "tag", "regex", "all"].contains($0.name) }
        guard scopes.count == 1, let scope = scopes.first else {
            return .error(400, "give exactly one of url=, prefix=, tag=, regex= or all=true")
        }
        switch scope.name {
        case "url":
            guard let target = Self.target(fromPathOrURL: scope.value) else {
                return .error(400, "url must be a path (/a/b?c) or an http(s) URL")
            }
            return purge(scope: .key(target), soft: soft)
        case "prefix":
            guard scope.value.hasPrefix("/") else { return .error(400, "prefix must be a path starting with /") }
            return purge(scope: .prefix(DotSegments.normalize(scope.value)), soft: soft)
        case "tag":
            guard !scope.value.isEmpty else { return .error(400, "tag must not be empty") }
            return purge(scope: .tag(scope.value), soft: soft)
        case "regex":
            switch PurgePattern.compile(scope.value) {
            case .success(let pattern): return purge(scope: .regex(pattern), soft: soft)
            case .failure(let problem): return .error(400, "regex does not compile: \(problem.message)")
            }
        default:
            guard scope.value == "true" else { return .error(400, "all must be true") }
            return purge(scope: .all, soft: soft)
        }
    }

    private func purge(scope: PurgeScope, soft: Bool) -> Response {
        if case .key(let target) = scope, !target.hasPrefix("/") { return .error(400, "PURGE needs a path target such as /a/b") }
        let (count, failures) = Self.apply(scope, soft: soft, to: store, purgeScopes: purgeScopes)
        metrics.purged += count
        let status: Int, fields: String
        if failures.isEmpty {
            log("admin: \(soft ? "soft-" : "")purged \(scope) (\(count) responses)")
            (status, fields) = (200, "\"purged\": \(count)")
        } else {
            // Files that stay would be served again after a restart: the
            // purge did not fully hold, and the caller must know.
            log("admin: \(soft ? "soft-" : "")purge of \(scope) incomplete: \(failures.count) files failed (\(failures[0]))")
            let error = JSON.string(failures[0] + "; these responses are gone until a restart finds their files again: "
                                    + "fix the cache directory (later purges and a sweep every minute delete them)")
            (status, fields) = (500, "\"purged\": \(count), \"failed\": \(failures.count), \"error\": \(error)")
        }
        var response = Response.json(status, "{\(fields)}")
        guard let fanOut else { return response }
        // The other nodes get it whatever happened to this node's files.
        response.later = { reply in
            fanOut.send(scope, soft: soft) { delivery in reply(.json(status, "{\(fields), \"fleet\": \(delivery.json)}")) }
        }
        return response
    }

    /// A purge applied to this node's store, from the admin API or from
    /// another node of the fleet. A URL names what `purgeScopes` says: its
    /// target and its stored key (the target after its route's key
    /// options), and with virtual hosts and no host named, the path on
    /// every host.
    public static func apply(_ scope: PurgeScope, soft: Bool, to store: TieredStore,
                             purgeScopes: (String) -> [PurgeScope]) -> (purged: Int, failures: [String]) {
        guard case .key(let target) = scope else { return store.purgeReportingFailures(scope, soft: soft) }
        var count = 0, failures: [String] = []
        for each in purgeScopes(target) {
            let done = store.purgeReportingFailures(each, soft: soft)
            count += done.purged
            // (A file that could not go is retried by each scope's purge: reported once.)
            for failure in done.failures where !failures.contains(failure) { failures.append(failure) }
        }
        return (count, failures)
    }

    private func prune(_ query: [(name: String, value: String)]) -> Response {
        guard let text = query.last(where: { $0.name == "older-than" })?.value, let seconds = Self.durationSeconds(text) else {
            return .error(400, "older-than must be a duration such as 90s, 5m, 2h or 7d")
        }
        let pruned = store.prune(storedBefore: clock() - seconds)
        log("admin: pruned \(pruned) responses stored more than \(text) ago")
        return .json(200, "{\"pruned\": \(pruned)}")
    }

    private func advanceClock(_ query: [(name: String, value: String)]) -> Response {
        guard let text = query.last(where: { $0.name == "advance" })?.value, let seconds = Double(text),
              seconds >= 0, seconds <= 366 * 86_400 else {
            return .error(400, "advance must be a number of seconds from 0 to a year, such as 2.5")
        }
        let milliseconds = Int64((seconds * 1000).rounded())
        moveClock?(milliseconds)
        log("admin: every clock moved on by \(text) s (LARDER_TEST_CLOCK)")
        return .json(200, "{\"advanced_ms\": \(milliseconds)}")
    }

    // MARK: stats

    public func snapshot() -> StatsSnapshot {
        var snapshot = StatsSnapshot(
            hits: stats.total(.hits), misses: stats.total(.misses),
            staleHits: stats.total(.staleHits), revalidations: stats.total(.revalidations),
            collapsed: stats.total(.collapsed), upstreamErrors: stats.total(.upstreamErrors),
            stored: stats.total(.stored), backgroundRefreshes: stats.total(.backgroundRefreshes),
            rangeFills: stats.total(.rangeFills), upgrades: stats.total(.upgrades), upgradedBytes: stats.total(.upgradedBytes),
            clientErrors: stats.total(.clientErrors), refusedConnections: stats.total(.refusedConnections),
            outputPauses: stats.total(.outputPauses), sendTimeouts: stats.total(.sendTimeouts),
            streamedBodies: stats.total(.streamedBodies), offloadedLookups: stats.total(.offloadedLookups),
            offloadedReads: stats.total(.offloadedReads),
            tlsHandshakes: stats.total(.tlsHandshakes), tlsResumed: stats.total(.tlsResumed),
            tlsFailures: stats.total(.tlsFailures), plainOnTLS: stats.total(.plainOnTLS),
            http2Connections: stats.total(.http2Connections), http2Requests: stats.total(.http2Streams),
            http2Resets: stats.total(.http2Resets), http2Refusals: stats.total(.http2Refusals),
            http3Connections: stats.total(.http3Connections), http3Requests: stats.total(.http3Streams),
            http3Resets: stats.total(.http3Resets), quicRetries: stats.total(.quicRetries),
            quicStatelessResets: stats.total(.quicStatelessResets), quicDropped: stats.total(.quicDropped),
            accessDenied: stats.total(.accessDenied), rateLimited: stats.total(.rateLimited),
            receivedBytes: stats.total(.receivedBytes), sentBytes: stats.total(.sentBytes),
            latency: LatencyHistograms.Series.allCases.map { stats.latency($0) }, responses: stats.responses,
            adminRefusedConnections: stats.adminRefusedConnections.load(ordering: .relaxed),
            adminFailedSignIns: stats.adminFailedSignIns.load(ordering: .relaxed),
            accessLogDroppedBytes: stats.accessLogDroppedBytes.load(ordering: .relaxed),
            openConnections: stats.openConnections.load(ordering: .relaxed), ioJobs: stats.ioJobs, ioThreads: stats.ioThreads, purged: metrics.purged,
            tiers: store.stats, uptimeSeconds: max(0, clock() - startedAt), fleet: fanOut?.status)
        (snapshot.version, snapshot.node, snapshot.upstream) = identity
        let now = EventLoop.nowMilliseconds()
        snapshot.upstreams = pools().map { UpstreamPoolFigures($0, now: now) }
        return snapshot
    }

    // MARK: parsing

    /// Path and decoded query parameters of a request target.
    static func split(_ target: String) -> (path: String, query: [(name: String, value: String)]) {
        guard let mark = target.firstIndex(of: "?") else { return (target, []) }
        let query = target[target.index(after: mark)...].split(separator: "&").map { pair -> (name: String, value: String) in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (percentDecode(parts[0]), parts.count > 1 ? percentDecode(parts[1]) : "")
        }
        return (String(target[..<mark]), query)
    }

    /// %XX decoding ('+' stays '+': paths may hold it literally). Invalid
    /// escapes are kept as they are.
    static func percentDecode(_ s: Substring) -> String {
        String(decoding: PercentDecoding.decode(s.utf8, plusIsSpace: false), as: UTF8.self)
    }

    /// "/a?b" stays; "https://host:port/a?b" becomes "/a?b host:port": the
    /// host counts where routes name hosts (virtual hosts), and is dropped
    /// where they do not (`RouteTable.purgeScopes`).
    /// Dot segments are removed as from a request's target (`DotSegments`),
    /// so a URL purges what a client asking for it is served.
    static func target(fromPathOrURL value: String) -> String? {
        if value.hasPrefix("/") { return DotSegments.normalize(value) }
        for scheme in ["http://", "https://"] where value.lowercased().hasPrefix(scheme) {
            let rest = value.dropFirst(scheme.count)
            let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
            let host = rest[..<slash]
            guard !host.isEmpty, !host.contains(" ") else { return nil }
            let target = String(rest[slash...])
            return DotSegments.normalize(target.hasPrefix("/") ? target : "/" + target) + " " + host
        }
        return nil
    }

    /// 90s, 5m, 2h, 7d, or plain seconds.
    static func durationSeconds(_ text: String) -> Int64? {
        guard let last = text.last else { return nil }
        let multiplier: Int64
        var digits = Substring(text)
        switch last {
        case "s": multiplier = 1
        case "m": multiplier = 60
        case "h": multiplier = 3600
        case "d": multiplier = 86400
        default: multiplier = 1
        }
        if !last.isNumber { digits = digits.dropLast() }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let n = Int64(digits), n >= 0, n < Int64.max / 86400 else { return nil }
        return n * multiplier
    }
}
