import CacheSemantics
import FoundationEssentials
import CacheStorage
import EdgeControls
import Proxy
import Routing
import TOMLKit

/// Reads a TOML config file into `Settings`. Unknown keys and wrong types
/// are errors naming the file, line and key.
public enum ConfigFile {
    public static func load(_ path: String, into settings: inout Settings) throws(ConfigError) {
        let text: String
        switch readTextFile(path) {
        case .success(let contents): text = contents
        case .failure(let reason): throw ConfigError(file: path, line: nil, key: nil, message: "cannot read the file (\(reason.message))")
        }
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigError(file: path, line: error.source.begin.line, key: nil, message: "invalid TOML: \(error.description)")
        } catch {
            throw ConfigError(file: path, line: nil, key: nil, message: "invalid TOML: \(error)")
        }
        let lines = keyLines(text)
        // Presets first: every lifetime in the file may use them.
        if let value = table["presets"] { settings.presets = try presets(value, path: path, lines: lines) }
        for key in table.keys.map({ (line: lines[$0] ?? 0, key: $0) }).sorted(by: { $0.line < $1.line }).map(\.key) {
            guard let value = table[key] else { continue }
            if key == "presets" { continue }
            if key == "route" {
                settings.routes = try routes(value, path: path, lines: lines, presets: settings.presets)
                continue
            }
            if key == "upstreams" {
                settings.pools = try PoolConfig.parse(value) { name, key, message in
                    let line = lines["upstreams.\(name).\(key)"] ?? lines["upstreams.\(name)"] ?? lines["upstreams"]
                    return ConfigError(file: path, line: line, key: key.isEmpty ? "upstreams.\(name)" : "upstreams.\(name).\(key)",
                                       message: message)
                }
                continue
            }
            if key == "listen", value.type == .array {
                settings.listeners = try ListenerConfig.parse(value) { index, key, message in
                    let line = lines["listen.\(index).\(key)"] ?? lines["listen.\(index)"] ?? lines["listen"]
                    return ConfigError(file: path, line: line, key: key.isEmpty ? "listen" : "listen.\(key)", message: message)
                }
                continue
            }
            if EdgeConfig.keys.contains(key) || EdgeConfig.globalKeys.contains(key) {
                let fail: EdgeConfig.Fail = { key, message in
                    ConfigError(file: path, line: lines[key] ?? lines[String(key.prefix { $0 != "." })], key: key, message: message)
                }
                switch key {
                case "admin_allow": settings.adminAllow = try EdgeConfig.addresses(value, key: key, fail: fail)
                case "trusted_proxies": settings.proxy.trustedProxies = try EdgeConfig.addresses(value, key: key, fail: fail)
                default: try EdgeConfig.apply(key, value, to: &settings.edge, fail: fail)
                }
                continue
            }
            if key == "fleet" {
                guard value.type == .table, let table = value.table else {
                    throw ConfigError(file: path, line: lines["fleet"], key: "fleet", message: "expected a [fleet] table")
                }
                settings.fleet = try FleetConfig.parse(table) { key, message in
                    ConfigError(file: path, line: lines["fleet.\(key)"] ?? lines["fleet"], key: "fleet.\(key)", message: message)
                }
                continue
            }
            guard let known = ConfigKey(rawValue: key) else {
                if value.type == .table, let table = value.table {
                    throw ConfigError(file: path, line: lines[key], key: key, message: unknownTable(key, keys: table.keys))
                }
                throw ConfigError(file: path, line: lines[key], key: key,
                                  message: UnknownKey.message("key", key, known: ConfigKey.allCases.map(\.rawValue) + EdgeConfig.keys
                                                                  + EdgeConfig.globalKeys + tables))
            }
            let raw: RawValue
            switch value.type {
            case .string: raw = .string(value.string!)
            case .int: raw = .integer(value.int!)
            case .bool: raw = .bool(value.bool!)
            case .array where known.kind == .list:
                let items = value.array!
                let names = (0..<items.count).compactMap { items[$0].string }
                guard names.count == items.count else {
                    throw ConfigError(file: path, line: lines[key], key: key, message: expectation(known))
                }
                raw = .list(names)
            default:
                throw ConfigError(file: path, line: lines[key], key: key, message: "wrong type \(value.type), \(expectation(known))")
            }
            if case .integer = raw, known.kind != .integer {
                if known.kind != .size && known != .stale_on_disconnect {  // plain seconds; 0 is off
                    throw ConfigError(file: path, line: lines[key], key: key, message: "wrong type integer, \(expectation(known))")
                }
            }
            if case .bool = raw, known.kind != .bool {
                throw ConfigError(file: path, line: lines[key], key: key, message: "wrong type boolean, \(expectation(known))")
            }
            if case .string = raw, known.kind == .bool {
                throw ConfigError(file: path, line: lines[key], key: key, message: "wrong type string, \(expectation(known))")
            }
            if let problem = settings.apply(known, raw) {
                throw ConfigError(file: path, line: lines[key], key: key, message: problem)
            }
        }
        if let problem = settings.accessLogFormatProblem() {
            throw ConfigError(file: path, line: lines[problem.key] ?? nil, key: problem.key, message: problem.message)
        }
        // Upstream names are known once every table is read.
        if let problem = settings.unknownPool() {
            let line = problem.route.map { lines["route.\($0).upstream"] } ?? lines["upstream"]
            throw ConfigError(file: path, line: line ?? nil, key: problem.route == nil ? "upstream" : "route.upstream",
                              message: problem.message)
        }
    }

    /// The keys a `[[route]]` table may have.
    public static let routeKeys = ["prefix", "policy", "allow_client_policy", "default_ttl", "ignore_upstream_cache_control",
                            "ignore_no_store", "negative_ttl", "disk", "ignore_query", "ignore_query_params", "sort_query",
                            "memory_ttl", "disk_ttl", "methods", "glob", "key_headers", "tags", "stale_on_disconnect", "stale_timeout", "grace", "websocket",
                            "compress", "upstream", "hosts", "cache_post", "max_post_body", "normalize_json",
                            "uncached_rpc_methods", "cache_persisted_queries"] + EdgeConfig.keys

    /// `[[route]]` tables: every key checked, errors with file, line and key.
    /// `[presets]`: short, medium, long and max as durations.
    private static func presets(_ value: TOMLValueConvertible, path: String, lines: [String: Int]) throws(ConfigError) -> [String: Int] {
        guard value.type == .table, let table = value.table else {
            throw ConfigError(file: path, line: lines["presets"], key: "presets", message: "expected a [presets] table")
        }
        var presets = Units.defaultPresets
        for key in table.keys {
            let line = lines["presets.\(key)"] ?? lines["presets"]
            guard presets[key] != nil else {
                throw ConfigError(file: path, line: line, key: "presets.\(key)", message: "unknown preset (known: short, medium, long, max)")
            }
            guard let text = table[key]?.string, let ms = Units.parseDurationMilliseconds(text), ms >= 1000 else {
                throw ConfigError(file: path, line: line, key: "presets.\(key)", message: "expected a duration string such as \"10m\"")
            }
            presets[key] = ms / 1000
        }
        return presets
    }

    private static func routes(_ value: TOMLValueConvertible, path: String, lines: [String: Int],
                               presets: [String: Int]) throws(ConfigError) -> [Route] {
        guard value.type == .array, let array = value.array else {
            throw ConfigError(file: path, line: lines["route"], key: "route", message: "expected [[route]] tables")
        }
        var routes: [Route] = []
        for index in 0..<array.count {
            let header = lines["route.\(index)"]
            guard let table = array[index].table else {
                throw ConfigError(file: path, line: header, key: "route", message: "expected [[route]] tables")
            }
            func fail(_ key: String, _ message: String) -> ConfigError {
                ConfigError(file: path, line: lines["route.\(index).\(key)"] ?? header, key: "route.\(key)", message: message)
            }
            guard let prefix = table["prefix"]?.string else {
                throw ConfigError(file: path, line: header, key: "route.prefix",
                                  message: "every [[route]] needs a prefix string, e.g. prefix = \"/api/\"")
            }
            guard prefix.hasPrefix("/") else { throw fail("prefix", "must start with /") }
            var route = Route(prefix: prefix)
            for key in table.keys where key != "prefix" {
                guard routeKeys.contains(key), let item = table[key] else {
                    throw fail(key, UnknownKey.message("route key", key, known: routeKeys))
                }
                if EdgeConfig.keys.contains(key) {
                    try EdgeConfig.apply(key, item, to: &route.edge) { key, message in
                        ConfigError(file: path, line: lines["route.\(index).\(key.prefix { $0 != "." })"] ?? header, key: "route.\(key)",
                                    message: message)
                    }
                    continue
                }
                switch key {
                case "policy":
                    guard let name = item.string else { throw fail(key, "expected a policy name string") }
                    guard let policy = RequestPolicy(name: name) else {
                        throw fail(key, "unknown policy; valid names: " + RequestPolicy.validNames.joined(separator: ", "))
                    }
                    route.policy = policy
                case "key_headers":
                    guard item.type == .array, let names = item.array?.compactMap({ $0.string }), names.count == item.array?.count,
                          names.allSatisfy({ !$0.isEmpty && !$0.contains(" ") && !$0.contains(":") }) else {
                        throw fail(key, "expected a list of request header names, e.g. [\"X-Tenant\"]")
                    }
                    route.keyHeaders = names.map { $0.lowercased() }
                case "tags":
                    guard item.type == .array, let names = item.array?.compactMap({ $0.string }), names.count == item.array?.count,
                          names.allSatisfy({ !$0.isEmpty && !$0.contains(" ") && !$0.contains(",")
                              && $0.utf8.count <= PurgeTags.maxLength }) else {
                        throw fail(key, "expected a list of tags without spaces or commas, e.g. [\"catalog\", \"v2\"]")
                    }
                    route.tags = names
                case "max_post_body":
                    guard let text = item.string, let bytes = Units.parseSize(text), bytes > 0, bytes <= 16 << 20 else {
                        throw fail(key, "expected a size from 1B to 16MiB, e.g. \"64KiB\"")
                    }
                    route.maxPostBody = bytes
                case "uncached_rpc_methods":
                    guard item.type == .array, let names = item.array?.compactMap({ $0.string }), names.count == item.array?.count,
                          names.allSatisfy({ !$0.isEmpty }) else {
                        throw fail(key, "expected a list of JSON-RPC method names, e.g. [\"eth_sendRawTransaction\"]")
                    }
                    route.uncachedRPCMethods = names
                case "hosts":
                    guard item.type == .array, let names = item.array?.compactMap({ $0.string }), names.count == item.array?.count,
                          !names.isEmpty else {
                        throw fail(key, "expected a list of host names, e.g. [\"api.example.com\", \"*.example.org\"]")
                    }
                    route.hosts = try names.map { (name: String) throws(ConfigError) -> String in
                        guard let pattern = VirtualHosts.pattern(name) else {
                            throw fail(key, "\"\(name)\" is not a host name (letters, digits, - and ., no port), "
                                       + "or *. and one for every name under it")
                        }
                        return pattern
                    }
                case "methods":
                    guard item.type == .array, let names = item.array?.compactMap({ $0.string }), names.count == item.array?.count,
                          !names.isEmpty else {
                        throw fail(key, "expected a list of methods, e.g. [\"GET\", \"HEAD\"]")
                    }
                    route.methods = Set(names.map { $0.uppercased() })
                case "upstream":
                    guard let name = item.string, PoolConfig.isName(name) else {
                        throw fail(key, "expected the name of an [upstreams.NAME] table")
                    }
                    route.upstream = name
                case "glob":
                    guard let pattern = item.string, !pattern.isEmpty else { throw fail(key, "expected a glob string, e.g. \"*.jpg\"") }
                    route.glob = pattern
                case "memory_ttl", "disk_ttl":
                    guard let text = item.string else { throw fail(key, "expected a duration or preset string") }
                    if key == "disk_ttl" && text.lowercased() == "mirror" {
                        route.diskMirrorsMemory = true
                        continue
                    }
                    guard let seconds = Units.parseLifetimeSeconds(text, presets: presets) else {
                        throw fail(key, "expected a duration (at least 1s) or short, medium, long, max, never"
                                   + (key == "disk_ttl" ? ", mirror" : ""))
                    }
                    if key == "memory_ttl" { route.memoryTTL = .some(seconds) } else { route.diskTTL = .some(seconds) }
                case "ignore_query_params":
                    guard item.type == .array, let names = item.array?.compactMap({ $0.string }), names.count == item.array?.count else {
                        throw fail(key, "expected a list of parameter names, e.g. [\"utm_source\", \"utm_medium\"]")
                    }
                    route.ignoredQueryParameters = Set(names)
                case "compress":
                    guard item.type == .array, let types = item.array?.compactMap({ $0.string }), types.count == item.array?.count
                    else { throw fail(key, Settings.compressExpectation) }
                    switch Settings.compressPatterns(types) {
                    case .success(let patterns): route.compress = patterns
                    case .failure(let problem): throw fail(key, problem.message)
                    }
                case "stale_on_disconnect", "grace":
                    guard let text = item.string ?? item.int.map({ String($0) }), let seconds = Units.parseGraceSeconds(text) else {
                        throw fail(key, Units.graceExpectation)
                    }
                    if key == "grace" { route.grace = seconds } else { route.staleOnDisconnect = seconds }
                case "stale_timeout":
                    guard let text = item.string, let ms = Units.parseStaleTimeoutMilliseconds(text) else {
                        throw fail(key, Units.staleTimeoutExpectation)
                    }
                    route.staleTimeoutMilliseconds = ms
                case "default_ttl", "negative_ttl":
                    guard let text = item.string, let seconds = Units.parseLifetimeSeconds(text, presets: presets) else {
                        throw fail(key, "expected a duration string such as \"5m\" or short, medium, long, max, never")
                    }
                    let ttl = seconds ?? Int(Int32.max)  // never: as long as a delta-seconds can say
                    if key == "default_ttl" { route.defaultTTL = ttl } else { route.negativeTTL = ttl }
                default:
                    guard item.type == .bool, let flag = item.bool else { throw fail(key, "expected true or false") }
                    switch key {
                    case "allow_client_policy": route.allowClientPolicy = flag
                    case "ignore_upstream_cache_control": route.ignoreUpstreamCacheControl = flag
                    case "ignore_no_store": route.ignoreNoStore = flag
                    case "ignore_query": route.ignoreQuery = flag
                    case "sort_query": route.sortQuery = flag
                    case "cache_post": route.cachePost = flag
                    case "normalize_json": route.normalizeJSON = flag
                    case "cache_persisted_queries": route.cachePersistedQueries = flag
                    case "websocket": route.websocket = flag
                    default: route.disk = flag
                    }
                }
            }
            if route.ignoreUpstreamCacheControl && route.defaultTTL == nil {
                throw fail("ignore_upstream_cache_control", "needs default_ttl in the same route (how long to keep responses)")
            }
            // (max_post_body also bounds the bodies of QUERY requests, cached without cache_post.)
            for postKey in ["normalize_json", "uncached_rpc_methods", "cache_persisted_queries"] where table.contains(key: postKey) && !route.cachePost {
                throw fail(postKey, "only applies with cache_post = true")
            }
            if route.ignoreNoStore && !route.ignoreUpstreamCacheControl {
                throw fail("ignore_no_store", "only applies with ignore_upstream_cache_control = true")
            }
            routes.append(route)
        }
        return routes
    }

    private static func expectation(_ key: ConfigKey) -> String {
        switch key.kind {
        case .string: return "expected a string"
        case .size: return "expected a size string such as \"256MiB\" (or an integer of bytes)"
        case .duration: return "expected a duration string such as \"30s\""
        case .integer: return "expected an integer"
        case .bool: return "expected true or false"
        case .lifetime: return "expected a duration string such as \"1h\" or a preset"
        case .list: return key == .compress ? Settings.compressExpectation : "expected a list of strings"
        }
    }

    /// Line numbers of top-level `key = value` lines. TOMLKit does not report
    /// positions of keys, so they are found by a light scan of the text.
    /// Keys inside the n-th `[[route]]` table are recorded as "route.n.key",
    /// the table's header line as "route.n"; likewise "listen.n.key" (and
    /// "listen.n.certificates.key") for `[[listen]]` tables.
    public static func keyLines(_ text: String) -> [String: Int] {
        // Bytes, not Characters: a scan by grapheme cluster took more
        // instructions than parsing the file (and never split "\r\n").
        let bytes = Array(text.utf8)
        func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D }
        var result: [String: Int] = [:]
        var scope: String? = ""  // "" top level, "route.n" in a route table, nil elsewhere
        var routeIndex = -1
        var listenIndex = -1
        var (start, lineNumber) = (0, 0)
        while start <= bytes.count {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            lineNumber += 1
            var (low, high) = (start, end)
            start = end + 1
            while low < high && isBlank(bytes[low]) { low += 1 }
            while high > low && isBlank(bytes[high - 1]) { high -= 1 }
            guard low < high else { continue }
            if bytes[low] == UInt8(ascii: "[") {
                let name = String(decoding: bytes[low..<high].filter { $0 != UInt8(ascii: "[") && $0 != UInt8(ascii: "]") && $0 != 0x20 },
                                  as: UTF8.self)
                if high - low > 1 && bytes[low + 1] == UInt8(ascii: "[") && name == "route" {
                    routeIndex += 1
                    scope = "route.\(routeIndex)"
                    result[scope!] = lineNumber
                    if result["route"] == nil { result["route"] = lineNumber }
                } else if high - low > 1 && bytes[low + 1] == UInt8(ascii: "[") && name == "listen" {
                    listenIndex += 1
                    scope = "listen.\(listenIndex)"
                    result[scope!] = lineNumber
                    if result["listen"] == nil { result["listen"] = lineNumber }
                } else if name == "listen.certificates" && listenIndex >= 0 {
                    scope = "listen.\(listenIndex).certificates"
                } else if name.hasPrefix("upstreams.") {
                    scope = name
                    result[name] = lineNumber
                    if result["upstreams"] == nil { result["upstreams"] = lineNumber }
                } else if name == "presets" || name == "fleet" {
                    scope = name
                    result[name] = lineNumber
                } else {
                    // A table no key names (a typo, or from another
                    // program's file): its header's line, for the error.
                    let top = String(name.split(separator: ".").first ?? "")
                    if result[top] == nil { result[top] = lineNumber }
                    scope = nil
                }
                continue
            }
            guard let scope, bytes[low] != UInt8(ascii: "#"), var keyEnd = bytes[low..<high].firstIndex(of: UInt8(ascii: "=")) else { continue }
            var keyStart = low
            while keyEnd > keyStart && isBlank(bytes[keyEnd - 1]) { keyEnd -= 1 }
            if keyEnd - keyStart >= 2, bytes[keyStart] == UInt8(ascii: "\"") || bytes[keyStart] == UInt8(ascii: "'"),
               bytes[keyEnd - 1] == bytes[keyStart] {
                (keyStart, keyEnd) = (keyStart + 1, keyEnd - 1)
            }
            let key = String(decoding: bytes[keyStart..<keyEnd], as: UTF8.self)
            let full = scope.isEmpty ? key : scope + "." + key
            if result[full] == nil { result[full] = lineNumber }
        }
        return result
    }
}

extension ConfigFile {
    /// The tables a config file may have; every other setting is a top-level key.
    public static let tables = ["route", "fleet", "presets", "upstreams", "listen"]

    /// An unknown table's message: a misspelt table's name, or, for a table
    /// whose keys are top-level keys with its name in front (`[admin]`
    /// `listen` for `admin_listen`), those keys as they must be written.
    public static func unknownTable(_ name: String, keys: [String]) -> String {
        let flattened = keys.map { "\(name)_\($0)" }.filter { ConfigKey(rawValue: $0) != nil }
        if !flattened.isEmpty, flattened.count == keys.count {
            return "unknown table (write these as top-level keys before any table: "
                + flattened.sorted().joined(separator: ", ") + ")"
        }
        return UnknownKey.message("table", name, known: tables)
    }
}
