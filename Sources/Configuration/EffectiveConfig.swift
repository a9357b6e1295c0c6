import Bytes
import Compression
import HTTP1
import Logging
import Proxy
import Routing
import TLS
import Upstream
import Redis
import CacheSemantics

/// `larder check-config --print`: the whole configuration in effect, every
/// key with its value (set or default), routes, listeners and the fleet
/// included, as a config file that says exactly that (as `nginx -T`
/// shows nginx's). Tokens are never printed: a token given in the file is
/// named, not shown.
public enum EffectiveConfig {
    public static func render(_ settings: Settings) -> String {
        var out = "# The effective configuration: defaults, the config file and flags merged.\n"
        for key in ConfigKey.allCases {
            out += line(key, settings) + "\n"
        }
        out += EdgeConfig.renderGlobal(settings)
        if settings.presets != Units.defaultPresets {
            out += "\n[presets]\n"
            for name in ["short", "medium", "long", "max"] { out += "\(name) = \(quoted(duration(settings.presets[name]! * 1000)))\n" }
        }
        for pool in settings.pools {
            out += "\n[upstreams.\(pool.name)]\nservers = \(list(pool.servers))\nbalance = \(quoted(pool.balance.rawValue))\n"
            out += "max_fails = \(pool.maxFails)\nfail_timeout = \(quoted(duration(pool.failTimeoutMilliseconds)))\n"
            if let check = pool.healthCheck {
                out += "health_check = \(quoted(check.path))\nhealth_interval = \(quoted(duration(check.intervalMilliseconds)))\n"
                if let status = check.status { out += "health_status = \(status)\n" }
            }
        }
        if !isSinglePlain(settings.listeners) { out += listeners(settings.listeners) }
        for route in settings.routes { out += self.route(route) }
        if let fleet = settings.fleet { out += self.fleet(fleet) }
        return out
    }

    private static func isSinglePlain(_ listeners: [ListenerConfig]) -> Bool {
        listeners.count == 1 && listeners[0].tls == nil && listeners[0].http2
    }

    /// One top-level key as a line (a comment where the value cannot be written back).
    public static func line(_ key: ConfigKey, _ s: Settings) -> String {
        let p = s.proxy
        let value: String
        switch key {
        case .listen:
            guard isSinglePlain(s.listeners) else { return "# listen: the [[listen]] tables below" }
            value = quoted(s.listeners[0].shown)
        case .upstream:
            guard let upstream = s.upstream else { return "# upstream: not set (give --upstream)" }
            value = quoted(upstream)
        case .memory_limit: value = quoted(size(s.memoryLimitBytes))
        case .cache_dir: value = quoted(s.cacheDirectory ?? "none")
        case .disk_limit: value = quoted(size(s.diskLimitBytes))
        case .max_object_size: value = quoted(size(p.maxObjectBytes))
        case .workers: value = String(s.workers)
        case .log_level: value = quoted(s.logLevel.rawValue)
        case .cache_mode: value = quoted(p.sharedCache ? "shared" : "private")
        case .targeted_cache_control: value = quoted(p.targetedCacheControl)
        case .memory_ttl: value = quoted(lifetime(s.memoryTTLSeconds))
        case .disk_ttl: value = quoted(s.diskMirrorsMemory ? "mirror" : lifetime(s.diskTTLSeconds))
        case .policy: value = quoted(p.defaultPolicy.rawValue)
        case .allow_client_policy: value = String(p.allowClientPolicy)
        case .upstream_connect_timeout: value = quoted(duration(p.upstream.connectTimeoutMilliseconds))
        case .upstream_timeout: value = quoted(duration(p.upstream.responseTimeoutMilliseconds))
        case .upstream_idle_timeout: value = quoted(duration(p.upstream.idleTimeoutSeconds * 1000))
        case .upstream_ca_file:
            guard let file = p.upstream.caFile else { return "# upstream_ca_file: none (the system's CAs)" }
            value = quoted(file)
        case .upstream_tls_verify: value = String(p.upstream.verifyTLS)
        case .keepalive_timeout: value = quoted(duration(Int(p.keepAliveTimeoutMilliseconds)))
        case .header_timeout: value = quoted(duration(Int(p.headerTimeoutMilliseconds)))
        case .max_header_size: value = quoted(size(p.limits.maxHeaderBytes))
        case .max_target_size: value = quoted(size(p.limits.maxTargetBytes))
        case .max_body_size: value = quoted(size(p.limits.maxBodyBytes))
        case .drain_timeout: value = quoted(duration(s.drainTimeoutMilliseconds))
        case .admin_listen:
            guard let host = s.adminHost else { value = quoted("none"); break }
            value = quoted(ListenerConfig(host: host, port: s.adminPort).shown)
        case .admin_token: return s.adminToken == nil ? "# admin_token: not set" : "# admin_token: set in the file (not shown)"
        case .admin_token_file:
            guard let file = s.adminTokenFile else { return "# admin_token_file: not set" }
            value = quoted(file)
        case .admin_read_token:
            return s.adminReadToken == nil ? "# admin_read_token: not set" : "# admin_read_token: set in the file (not shown)"
        case .admin_read_token_file:
            guard let file = s.adminReadTokenFile else { return "# admin_read_token_file: not set" }
            value = quoted(file)
        case .admin_healthz_public: value = String(s.adminHealthzPublic)
        case .strip_tag_headers: value = String(p.stripTagHeaders)
        case .strip_targeted_fields: value = String(p.stripTargetedFields)
        case .access_log: value = quoted(s.accessLog ?? "off")
        case .access_log_format: value = quoted(s.accessLogFormatName)
        case .access_log_template:
            guard let template = s.accessLogTemplate else { return "# access_log_template: not set" }
            value = quoted(template)
        case .upstream_retries: value = String(p.upstreamRetries)
        case .upstream_max_connections: value = String(s.upstreamMaxConnections)
        case .finish_store_limit: value = quoted(size(p.finishStoreLimitBytes))
        case .upstream_total_timeout:
            value = quoted(p.upstream.totalTimeoutMilliseconds == 0 ? "none" : duration(p.upstream.totalTimeoutMilliseconds))
        case .store_set_cookie: value = String(p.storeSetCookie)
        case .max_connections: value = String(p.maxConnections)
        case .body_timeout: value = quoted(duration(Int(p.bodyTimeoutMilliseconds)))
        case .max_header_count: value = String(p.limits.maxHeaderCount)
        case .forward_host: value = String(p.forwardHost)
        case .preserve_host: value = String(p.preserveHost)
        case .websocket: value = String(p.websocket)
        case .max_pipeline_buffer: value = quoted(size(p.pipelineBufferBytes))
        case .send_timeout: value = quoted(duration(Int(p.sendTimeoutMilliseconds)))
        case .admin_max_connections: value = String(s.adminMaxConnections)
        case .request_buffer_size: value = quoted(size(p.requestBufferBytes))
        case .request_buffer_total: value = quoted(size(p.requestBufferTotalBytes))
        case .pass_request_headers: value = list(p.passRequestHeaders)
        case .stale_on_disconnect: value = quoted(p.staleOnDisconnectSeconds == 0 ? "off" : duration(p.staleOnDisconnectSeconds * 1000))
        case .stale_timeout: value = quoted(p.staleTimeoutMilliseconds == 0 ? "off" : duration(p.staleTimeoutMilliseconds))
        case .grace: value = quoted(p.graceSeconds == 0 ? "0s" : duration(p.graceSeconds * 1000))
        case .compress: value = list(p.compressTypes.spelled)
        case .compress_codec: value = quoted(p.compressCodec.token)
        case .range_fill: value = String(p.rangeFill)
        case .disk_open_files:
            guard s.diskOpenFiles >= 0 else { return "# disk_open_files: automatic (half the open-file limit, at most 16384)" }
            value = String(s.diskOpenFiles)
        case .admin_hosts: value = list(s.adminHosts)
        case .io_threads: value = String(s.ioThreads)
        case .handshake_timeout: value = quoted(duration(Int(p.handshakeTimeoutMilliseconds)))
        case .http2_max_concurrent_streams: value = String(p.http2MaxConcurrentStreams)
        case .http3_retry_threshold: value = String(p.quicRetryAbove)
        }
        return "\(key.rawValue) = \(value)"
    }

    private static func listeners(_ listeners: [ListenerConfig]) -> String {
        var out = ""
        for listener in listeners {
            out += "\n[[listen]]\naddress = \(quoted(listener.shown))\nhttp2 = \(listener.http2)\n"
            if listener.http3 { out += "http3 = true\n" }
            guard let tls = listener.tls else { continue }
            out += "tls = true\nstrict_sni = \(tls.strictSNI)\n"
            out += certificate(tls.certificates[0])
            for more in tls.certificates.dropFirst() { out += "[[listen.certificates]]\n" + certificate(more) }
        }
        return out
    }

    private static func certificate(_ c: TLSCertificate) -> String {
        "certificate = \(quoted(c.chain))\nkey = \(quoted(c.key))\n" + (c.ocsp.map { "ocsp = \(quoted($0))\n" } ?? "")
    }

    private static func route(_ r: Route) -> String {
        var out = "\n[[route]]\nprefix = \(quoted(r.prefix))\n"
        if !r.hosts.isEmpty { out += "hosts = \(list(r.hosts))\n" }
        if r.cachePost { out += "cache_post = true\n" }
        // (It bounds QUERY bodies too, with or without cache_post.)
        if r.cachePost || r.maxPostBody != Route.defaultMaxPostBody { out += "max_post_body = \(quoted("\(r.maxPostBody)B"))\n" }
        if r.cachePost {
            if r.normalizeJSON { out += "normalize_json = true\n" }
            if !r.uncachedRPCMethods.isEmpty { out += "uncached_rpc_methods = \(list(r.uncachedRPCMethods))\n" }
            if r.cachePersistedQueries { out += "cache_persisted_queries = true\n" }
        }
        if !r.methods.isEmpty { out += "methods = \(list(r.methods.sorted()))\n" }
        if let glob = r.glob { out += "glob = \(quoted(glob))\n" }
        if let upstream = r.upstream { out += "upstream = \(quoted(upstream))\n" }
        if let policy = r.policy { out += "policy = \(quoted(policy.rawValue))\n" }
        if let allow = r.allowClientPolicy { out += "allow_client_policy = \(allow)\n" }
        if let ttl = r.defaultTTL { out += "default_ttl = \(quoted(ttl >= Int(Int32.max) ? "never" : duration(ttl * 1000)))\n" }
        if r.ignoreUpstreamCacheControl { out += "ignore_upstream_cache_control = true\n" }
        if r.ignoreNoStore { out += "ignore_no_store = true\n" }
        if let ttl = r.negativeTTL { out += "negative_ttl = \(quoted(ttl >= Int(Int32.max) ? "never" : duration(ttl * 1000)))\n" }
        if let grace = r.staleOnDisconnect { out += "stale_on_disconnect = \(quoted(grace == 0 ? "off" : duration(grace * 1000)))\n" }
        if let ms = r.staleTimeoutMilliseconds { out += "stale_timeout = \(quoted(ms == 0 ? "off" : duration(ms)))\n" }
        if let grace = r.grace { out += "grace = \(quoted(grace == 0 ? "0s" : duration(grace * 1000)))\n" }
        if let compress = r.compress { out += "compress = \(list(compress.spelled))\n" }
        if !r.tags.isEmpty { out += "tags = \(list(r.tags))\n" }
        if !r.disk { out += "disk = false\n" }
        if let websocket = r.websocket { out += "websocket = \(websocket)\n" }
        if let ttl = r.memoryTTL { out += "memory_ttl = \(quoted(lifetime(ttl)))\n" }
        if r.diskMirrorsMemory { out += "disk_ttl = \"mirror\"\n" } else if let ttl = r.diskTTL { out += "disk_ttl = \(quoted(lifetime(ttl)))\n" }
        if r.ignoreQuery { out += "ignore_query = true\n" }
        if !r.ignoredQueryParameters.isEmpty { out += "ignore_query_params = \(list(r.ignoredQueryParameters.sorted()))\n" }
        if r.sortQuery { out += "sort_query = true\n" }
        if !r.keyHeaders.isEmpty { out += "key_headers = \(list(r.keyHeaders))\n" }
        out += EdgeConfig.render(r.edge)
        return out
    }

    private static func fleet(_ f: FleetConfig) -> String {
        var out = "\n[fleet]\n"
        if f.followsSentinel {
            out += "sentinels = \(list(f.sentinels.map(FleetConfig.sentinelText)))\nmaster = \(quoted(f.masterName ?? ""))\n"
        } else {
            out += "redis = \(quoted(f.address.description))\n"
        }
        out += "name = \(quoted(f.name))\nnode = \(quoted(f.node))\n"
        if let file = f.passwordFile { out += "password_file = \(quoted(file))\n" }
        if let file = f.sentinelPasswordFile { out += "sentinel_password_file = \(quoted(file))\n" }
        if let file = f.tlsCAFile { out += "tls_ca_file = \(quoted(file))\n" }
        out += "max_object_size = \(quoted(size(f.maxObjectBytes)))\n"
        out += "connect_timeout = \(quoted(duration(Int(f.connectTimeoutMilliseconds))))\n"
        out += "timeout = \(quoted(duration(Int(f.timeoutMilliseconds))))\n"
        return out
    }

    // MARK: values

    /// A TOML basic string (escaped as JSON escapes: the same rules).
    public static func quoted(_ text: String) -> String { JSON.string(text) }

    public static func list(_ items: [String]) -> String { "[" + items.map(quoted).joined(separator: ", ") + "]" }

    /// Bytes in the largest binary unit that divides them.
    public static func size(_ bytes: Int) -> String {
        for (unit, factor) in [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
            where bytes >= factor && bytes % factor == 0 {
            return "\(bytes / factor)\(unit)"
        }
        return "\(bytes)B"
    }

    /// Milliseconds in the largest unit that divides them.
    public static func duration(_ milliseconds: Int) -> String {
        for (unit, factor) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)]
            where milliseconds >= factor && milliseconds % factor == 0 {
            return "\(milliseconds / factor)\(unit)"
        }
        return "\(milliseconds)ms"
    }

    /// A tier lifetime: a duration, or "never" (kept until evicted).
    public static func lifetime(_ seconds: Int?) -> String { seconds.map { duration($0 * 1000) } ?? "never" }
}
