import Compression
import CacheSemantics
import EdgeControls
#if canImport(Glibc)
import Glibc
#endif
import HTTP1
import Logging
import Proxy
import Routing
import Telemetry
import Threads
import Upstream

/// The daemon's settings after defaults, the config file and flags are merged
/// (flags win over the file, the file over defaults).
public struct Settings {
    public init() {}

    /// What the workers get (their defaults are ProxyConfiguration's):
    /// config keys and flags write straight into it, so an option reaches
    /// the proxy in one place. Serve adds the upstream URL, the routes and
    /// the per-worker share of upstream connections.
    public var proxy = ProxyConfiguration(upstreamBase: "")
    /// Where clients connect: `listen = "HOST:PORT"` (or --listen) sets the
    /// first listener's address; `[[listen]]` tables give the whole list.
    public var listeners = [ListenerConfig(host: "127.0.0.1", port: 8080)]
    public var listenHost: String {
        get { listeners[0].host }
        set { listeners[0].host = newValue }
    }
    public var listenPort: UInt16 {
        get { listeners[0].port }
        set { listeners[0].port = newValue }
    }
    public var upstream: String?
    public var memoryLimitBytes = 256 << 20
    /// `[fleet]`: nil for a node on its own.
    public var fleet: FleetConfig?
    /// nil: memory only.
    public var cacheDirectory: String?
    public var diskLimitBytes = 1 << 30
    /// `disk_open_files`: descriptors disk hits may keep open; -1: half
    /// the open-file limit, at most 16,384 (`DiskFiles.defaultKeepLimit`).
    public var diskOpenFiles = -1
    /// Tier lifetimes in seconds; nil: kept until evicted. `diskMirrorsMemory`:
    /// disk_ttl = "mirror".
    public var memoryTTLSeconds: Int?
    public var diskTTLSeconds: Int?
    public var diskMirrorsMemory = false
    public var workers = 0  // 0: one per core
    public var logLevel: Logger.Level = .info
    /// `[[route]]` tables, in file order.
    public var routes: [Route] = []
    /// The global edge controls (each route's are its own `edge`).
    public var edge = EdgeSettings()
    /// `admin_allow`: the addresses the admin API answers (nil: all).
    public var adminAllow: AddressList?
    /// `[upstreams.NAME]` tables: named pools of servers.
    public var pools: [PoolConfig] = []
    /// Preset lifetimes by name (short, medium, long, max).
    public var presets = Units.defaultPresets
    public var drainTimeoutMilliseconds = 10_000
    /// Admin listener; nil host: disabled (`none`).
    public var adminHost: String? = "127.0.0.1"
    public var adminPort: UInt16 = 8081
    public var adminToken: String?
    public var adminTokenFile: String?
    /// A token for reads only (/metrics, /stats, the status page and its views, /log).
    public var adminReadToken: String?
    public var adminReadTokenFile: String?
    /// /healthz answers without a token.
    public var adminHealthzPublic = true
    /// Open admin connections; more are answered 503 and closed.
    public var adminMaxConnections = 64
    /// Threads for the disk reads a worker's loop must not wait for.
    public var ioThreads = BlockingWork.defaultThreads
    /// Host names the admin API answers to besides IP literals and localhost.
    public var adminHosts: [String] = []
    /// Concurrent upstream connections, all workers together; more
    /// requests queue (inside libcurl) until one is free.
    public var upstreamMaxConnections = 512
    /// nil: off; "stdout", "stderr" or a file path.
    public var accessLog: String?
    /// access_log_format: "text", "json" (one JSON object per line) or
    /// "custom" (access_log_template's fields).
    public var accessLogFormatName = "text"
    public var accessLogTemplate: String?

    /// The access log's format (the template checked when the file was read).
    public var accessLogFormat: AccessLogFormat {
        switch accessLogFormatName {
        case "json": return .json
        case "custom": return (try? AccessTemplate(accessLogTemplate ?? "")).map { .custom($0) } ?? .text
        default: return .text
        }
    }

    /// What is wrong with access_log_format and access_log_template together.
    public func accessLogFormatProblem() -> (key: String, message: String)? {
        guard accessLogFormatName == "custom" else {
            guard accessLogTemplate == nil else {
                return ("access_log_template", "is read only with access_log_format = \"custom\"")
            }
            return nil
        }
        guard let template = accessLogTemplate else {
            return ("access_log_format", "\"custom\" needs access_log_template, e.g. \"$time $client $method $target $status\"")
        }
        do {
            _ = try AccessTemplate(template)
            return nil
        } catch {
            return ("access_log_template", error.description)
        }
    }
}

/// A configuration problem: which file, line and key, and what is wrong.
public struct ConfigError: Error, CustomStringConvertible {
    public let file: String
    public let line: Int?
    public let key: String?
    public let message: String

    public init(file: String, line: Int?, key: String?, message: String) {
        (self.file, self.line, self.key, self.message) = (file, line, key, message)
    }

    public var description: String {
        var where_ = file
        if let line { where_ += ":\(line)" }
        if let key { return "\(where_): \(key): \(message)" }
        return "\(where_): \(message)"
    }
}

/// The keys of the config file: each one's type and how it applies.
/// Kept in one table so that check-config, loading and the documented
/// example cannot drift apart.
public enum ConfigKey: String, CaseIterable {
    case listen, upstream, memory_limit, cache_dir, disk_limit, max_object_size, workers, log_level, cache_mode
    case targeted_cache_control, memory_ttl, disk_ttl, policy, allow_client_policy
    case upstream_connect_timeout, upstream_timeout, upstream_idle_timeout, upstream_ca_file, upstream_tls_verify
    case keepalive_timeout, header_timeout, max_header_size, max_target_size, max_body_size, drain_timeout
    case admin_listen, admin_token, admin_token_file, strip_tag_headers, strip_targeted_fields, access_log
    case upstream_retries, upstream_max_connections, finish_store_limit, upstream_total_timeout, store_set_cookie
    case max_connections, body_timeout, max_header_count, forward_host, max_pipeline_buffer
    case send_timeout, admin_max_connections, request_buffer_size, pass_request_headers, stale_on_disconnect
    case compress, range_fill, access_log_format, disk_open_files, admin_hosts, request_buffer_total, io_threads
    case handshake_timeout, http2_max_concurrent_streams, admin_read_token, admin_read_token_file, admin_healthz_public
    case preserve_host, stale_timeout, grace, access_log_template, websocket, http3_retry_threshold, compress_codec

    public enum Kind { case string, size, duration, integer, bool, lifetime, list }

    public var kind: Kind {
        switch self {
        case .listen, .upstream, .log_level, .cache_mode, .upstream_ca_file, .targeted_cache_control, .cache_dir, .policy,
             .admin_listen, .admin_token, .admin_token_file, .access_log, .access_log_format, .access_log_template, .admin_read_token,
             .admin_read_token_file, .compress_codec:
            return .string
        case .memory_limit, .disk_limit, .max_object_size, .max_header_size, .max_target_size, .max_body_size,
             .finish_store_limit, .max_pipeline_buffer, .request_buffer_size, .request_buffer_total: return .size
        case .upstream_connect_timeout, .upstream_timeout, .upstream_idle_timeout, .keepalive_timeout,
             .header_timeout, .drain_timeout, .upstream_total_timeout, .body_timeout, .send_timeout, .stale_on_disconnect,
             .handshake_timeout, .stale_timeout, .grace:
            return .duration
        case .workers, .upstream_retries, .upstream_max_connections, .max_connections, .max_header_count, .admin_max_connections,
             .disk_open_files, .io_threads, .http2_max_concurrent_streams, .http3_retry_threshold:
            return .integer
        case .upstream_tls_verify, .allow_client_policy, .strip_tag_headers, .strip_targeted_fields, .store_set_cookie, .forward_host,
             .range_fill, .admin_healthz_public, .preserve_host, .websocket:
            return .bool
        case .memory_ttl, .disk_ttl: return .lifetime
        case .pass_request_headers, .compress, .admin_hosts: return .list
        }
    }
}

/// A value read from the file or a flag, before it is applied.
public enum RawValue {
    case string(String)
    case integer(Int)
    case bool(Bool)
    case list([String])
}

extension Settings {
    /// tchar (RFC 9110 section 5.6.2): what a field name is made of.
    public static func isTokenByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(b)
    }

    /// Worker threads after resolving 0 (one per core).
    public var effectiveWorkers: Int { workers > 0 ? workers : max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// Integer keys: the values they accept and the setting each sets.
    /// An integer key's bounds and field (nil: not one). A switch, not a
    /// table: each key path is made when its key is set, not all at start-up.
    public static func integerKey(_ key: ConfigKey) -> (ClosedRange<Int>, WritableKeyPath<Settings, Int>)? {
        switch key {
        case .workers: (0...256, \.workers)
        case .upstream_retries: (0...10, \.proxy.upstreamRetries)
        case .upstream_max_connections: (1...100_000, \.upstreamMaxConnections)
        case .max_connections: (1...1_000_000, \.proxy.maxConnections)
        case .max_header_count: (8...10_000, \.proxy.limits.maxHeaderCount)
        case .admin_max_connections: (1...10_000, \.adminMaxConnections)
        case .disk_open_files: (0...1_000_000, \.diskOpenFiles)
        case .io_threads: (1...256, \.ioThreads)
        case .http2_max_concurrent_streams: (1...10_000, \.proxy.http2MaxConcurrentStreams)
        case .http3_retry_threshold: (0...1_000_000, \.proxy.quicRetryAbove)
        default: nil
        }
    }

    /// What `compress` takes (top level and in a route).
    /// A `compress` list, or what is wrong with it (top level and routes alike).
    public static func compressPatterns(_ types: [String]) -> Result<MediaTypePatterns, ConfigProblem> {
        MediaTypePatterns.parse(types).mapError { ConfigProblem(message: "\"\($0.entry)\" is not a media type; " + compressExpectation) }
    }

    public struct ConfigProblem: Error { let message: String }

    public static let compressExpectation = "expected a list of media types such as [\"application/json\", \"text/*\"] ([] for none)"

    /// The disk tier's lifetime after resolving "mirror".
    public var effectiveDiskTTLSeconds: Int? { diskMirrorsMemory ? memoryTTLSeconds : diskTTLSeconds }

    /// Applies one key; the error string says what is wrong with the value.
    public mutating func apply(_ key: ConfigKey, _ value: RawValue) -> String? {
        func text() -> String? {
            switch value {
            case .string(let s): return s
            case .integer(let n): return String(n)
            case .bool, .list: return nil
            }
        }
        switch key.kind {
        case .size:
            guard let t = text(), let bytes = Units.parseSize(t) else { return "expected a size such as 512KiB, 256MiB or 10GiB" }
            switch key {
            case .memory_limit: memoryLimitBytes = bytes
            case .disk_limit:
                guard bytes >= 1 << 20 else { return "must be at least 1MiB" }
                diskLimitBytes = bytes
            case .max_object_size: proxy.maxObjectBytes = bytes
            case .max_header_size:
                guard bytes >= 1024 else { return "must be at least 1KiB" }
                proxy.limits.maxHeaderBytes = bytes
            case .max_target_size:
                guard bytes >= 256 else { return "must be at least 256 bytes" }
                proxy.limits.maxTargetBytes = bytes
            case .max_body_size: proxy.limits.maxBodyBytes = bytes
            case .finish_store_limit: proxy.finishStoreLimitBytes = bytes
            case .request_buffer_size:
                guard bytes <= 64 << 20 else { return "must be at most 64MiB (bodies are held in memory)" }
                proxy.requestBufferBytes = bytes
            case .request_buffer_total: proxy.requestBufferTotalBytes = bytes
            case .max_pipeline_buffer:
                guard bytes >= 4096 else { return "must be at least 4KiB" }
                proxy.pipelineBufferBytes = bytes
            default: break
            }
        case .duration:
            if key == .stale_on_disconnect || key == .grace {
                guard let t = text(), let seconds = Units.parseGraceSeconds(t) else { return Units.graceExpectation }
                if key == .grace { proxy.graceSeconds = seconds } else { proxy.staleOnDisconnectSeconds = seconds }
                return nil
            }
            if key == .stale_timeout {
                guard let t = text(), let ms = Units.parseStaleTimeoutMilliseconds(t) else { return Units.staleTimeoutExpectation }
                proxy.staleTimeoutMilliseconds = ms
                return nil
            }
            if key == .upstream_total_timeout, let t = text(), ["none", "off", "0"].contains(t.lowercased()) {
                proxy.upstream.totalTimeoutMilliseconds = 0
                return nil
            }
            guard let t = text(), let ms = Units.parseDurationMilliseconds(t) else { return "expected a duration such as 90s, 5m, 2h or 7d" }
            guard ms > 0 else { return "must be longer than 0" }
            switch key {
            case .upstream_connect_timeout: proxy.upstream.connectTimeoutMilliseconds = ms
            case .upstream_timeout: proxy.upstream.responseTimeoutMilliseconds = ms
            case .upstream_idle_timeout:
                guard ms >= 1000 else { return "must be at least 1s" }
                proxy.upstream.idleTimeoutSeconds = ms / 1000
            case .keepalive_timeout: proxy.keepAliveTimeoutMilliseconds = UInt64(ms)
            case .header_timeout: proxy.headerTimeoutMilliseconds = UInt64(ms)
            case .handshake_timeout: proxy.handshakeTimeoutMilliseconds = UInt64(ms)
            case .drain_timeout: drainTimeoutMilliseconds = ms
            case .upstream_total_timeout: proxy.upstream.totalTimeoutMilliseconds = ms
            case .body_timeout: proxy.bodyTimeoutMilliseconds = UInt64(ms)
            case .send_timeout: proxy.sendTimeoutMilliseconds = UInt64(ms)
            default: break
            }
        case .integer:
            guard case .integer(let n) = value else {
                if case .string(let s) = value, let n = Int(s) { return apply(key, .integer(n)) }
                return "expected an integer"
            }
            guard let (range, field) = Self.integerKey(key) else { return nil }
            guard range.contains(n) else {
                return key == .workers ? "must be between 0 (one per core) and 256"
                    : "must be between \(range.lowerBound) and \(range.upperBound)"
            }
            self[keyPath: field] = n
        case .bool:
            guard case .bool(let b) = value else { return "expected true or false" }
            switch key {
            case .allow_client_policy: proxy.allowClientPolicy = b
            case .strip_tag_headers: proxy.stripTagHeaders = b
            case .strip_targeted_fields: proxy.stripTargetedFields = b
            case .store_set_cookie: proxy.storeSetCookie = b
            case .forward_host: proxy.forwardHost = b
            case .range_fill: proxy.rangeFill = b
            case .admin_healthz_public: adminHealthzPublic = b
            case .preserve_host: proxy.preserveHost = b
            case .websocket: proxy.websocket = b
            default: proxy.upstream.verifyTLS = b
            }
        case .list where key == .compress:
            guard case .list(let types) = value else { return Self.compressExpectation }
            switch Self.compressPatterns(types) {
            case .success(let patterns): proxy.compressTypes = patterns
            case .failure(let problem): return problem.message
            }
        case .list where key == .admin_hosts:
            guard case .list(let names) = value,
                  names.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy(Self.isTokenByte) }) else {
                return "expected a list of host names, e.g. [\"cache-admin.example\"]"
            }
            adminHosts = names.map { $0.lowercased() }
        case .list:
            guard case .list(let names) = value,
                  names.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { Self.isTokenByte($0) } }) else {
                return "expected a list of request header names, e.g. [\"Forwarded\"]"
            }
            proxy.passRequestHeaders = names.map { $0.lowercased() }
        case .lifetime:
            guard case .string(let s) = value else { return "expected a duration or preset string" }
            if key == .disk_ttl && s.lowercased() == "mirror" {
                diskMirrorsMemory = true
                return nil
            }
            guard let seconds = Units.parseLifetimeSeconds(s, presets: presets) else {
                return "expected a duration (at least 1s) or short, medium, long, max, never"
                    + (key == .disk_ttl ? ", mirror" : "")
            }
            if key == .memory_ttl { memoryTTLSeconds = seconds } else { diskTTLSeconds = seconds; diskMirrorsMemory = false }
        case .string:
            guard case .string(let s) = value else { return "expected a string" }
            switch key {
            case .listen:
                guard let hp = Units.parseHostPort(s) else { return "expected HOST:PORT, e.g. 127.0.0.1:8080" }
                listenHost = hp.host
                listenPort = hp.port
            case .upstream:
                // A URL, or the name of an [upstreams.NAME] table (checked once the file is read).
                guard Units.validUpstream(s) || PoolConfig.isName(s) else {
                    return "expected an http:// or https:// URL with a host, e.g. http://127.0.0.1:9000, or an [upstreams.NAME] name"
                }
                upstream = s
            case .log_level:
                guard let level = Logger.Level(rawValue: s.lowercased()) else {
                    return "expected one of trace, debug, info, notice, warning, error, critical"
                }
                logLevel = level
            case .cache_mode:
                switch s.lowercased() {
                case "shared": proxy.sharedCache = true
                case "private": proxy.sharedCache = false
                default: return "expected \"shared\" or \"private\""
                }
            case .compress_codec:
                guard let codec = Codec(token: s) else { return "expected \"gzip\", \"zstd\" or \"br\"" }
                proxy.compressCodec = codec
            case .upstream_ca_file: proxy.upstream.caFile = s
            case .policy:
                guard let chosen = RequestPolicy(name: s) else {
                    return "unknown policy; valid names: " + RequestPolicy.validNames.joined(separator: ", ")
                }
                proxy.defaultPolicy = chosen
            case .cache_dir:
                guard !s.isEmpty else { return "expected a directory, or \"none\" for memory only" }
                cacheDirectory = s == "none" ? nil : s
            case .targeted_cache_control:
                guard !s.isEmpty, s.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }) else {
                    return "expected a header field name, e.g. Larder-Cache-Control"
                }
                proxy.targetedCacheControl = s
            case .admin_listen:
                if s.lowercased() == "none" {
                    adminHost = nil
                    return nil
                }
                guard let hp = Units.parseHostPort(s) else { return "expected HOST:PORT, e.g. 127.0.0.1:8081, or none" }
                adminHost = hp.host
                adminPort = hp.port
            case .admin_token, .admin_read_token:
                guard s.utf8.count >= 8, s.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                    return "expected at least 8 visible characters without spaces"
                }
                if key == .admin_token { adminToken = s } else { adminReadToken = s }
            case .admin_read_token_file:
                guard !s.isEmpty else { return "expected a file path" }
                adminReadTokenFile = s
            case .admin_token_file:
                guard !s.isEmpty else { return "expected a file path" }
                adminTokenFile = s
            case .access_log:
                accessLog = ["off", "none", ""].contains(s.lowercased()) ? nil : s
            case .access_log_format:
                guard ["text", "json", "custom"].contains(s.lowercased()) else { return "expected \"text\", \"json\" or \"custom\"" }
                accessLogFormatName = s.lowercased()
            case .access_log_template:
                accessLogTemplate = s
            default: break
            }
        }
        return nil
    }
}
