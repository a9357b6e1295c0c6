import Proxy
import Routing
import EdgeControls
import TOMLKit

/// The edge-control keys (global, and the same in a `[[route]]`), read
/// from TOML into `EdgeSettings`: every value checked, an error naming
/// the key (`request_headers.set`) and what is wrong.
public enum EdgeConfig {
    /// Keys of both scopes.
    public static let keys = ["request_headers", "response_headers", "allow", "deny", "rate_limit", "strip_cookies", "key_cookies"]
    /// Keys of the global scope only.
    public static let globalKeys = ["admin_allow", "trusted_proxies"]

    public typealias Fail = (_ key: String, _ message: String) -> ConfigError

    /// Reads one key of `keys` into `settings`.
    public static func apply(_ key: String, _ value: TOMLValueConvertible, to settings: inout EdgeSettings,
                             fail: Fail) throws(ConfigError) {
        switch key {
        case "request_headers", "response_headers":
            let rules = try headerRules(value, key: key, towardsClients: key == "response_headers", fail: fail)
            if key == "request_headers" { settings.requestHeaders = rules } else { settings.responseHeaders = rules }
        case "allow", "deny":
            let list = try addresses(value, key: key, fail: fail)
            if key == "allow" { settings.allow = list } else { settings.deny = list }
        case "rate_limit": settings.rateLimit = try rateLimit(value, fail: fail)
        case "strip_cookies":
            guard value.type == .bool, let flag = value.bool else { throw fail(key, "expected true or false") }
            settings.stripCookies = flag
        default:
            guard value.type == .array, let items = value.array, let names = strings(items), names.allSatisfy(Cookies.isName) else {
                throw fail(key, "expected a list of cookie names, e.g. [\"lang\"]")
            }
            settings.keyCookies = names
        }
        if settings.stripCookies == true, !(settings.keyCookies ?? []).isEmpty {
            throw fail(key, "strip_cookies and key_cookies exclude each other (stripped, no cookie is left to key by)")
        }
    }

    /// A list of addresses and CIDR prefixes.
    public static func addresses(_ value: TOMLValueConvertible, key: String, fail: Fail) throws(ConfigError) -> AddressList {
        let expectation = "expected a list of addresses or CIDR prefixes, e.g. [\"127.0.0.0/8\", \"::1/128\"]"
        guard value.type == .array, let items = value.array, let entries = strings(items) else { throw fail(key, expectation) }
        switch AddressList.parse(entries) {
        case .success(let list): return list
        case .failure(let bad): throw fail(key, "\"\(bad.entry)\" is not an address or prefix (host bits must be 0); " + expectation)
        }
    }

    private static func strings(_ items: TOMLArray) -> [String]? {
        let names = (0..<items.count).compactMap { items[$0].string }
        return names.count == items.count ? names : nil
    }

    private static func headerRules(_ value: TOMLValueConvertible, key: String, towardsClients: Bool,
                                    fail: Fail) throws(ConfigError) -> HeaderRules {
        guard value.type == .table, let table = value.table else {
            throw fail(key, "expected a table such as { set = { \"X-Env\" = \"prod\" }, add = { ... }, remove = [\"X-Debug\"] }")
        }
        var set: [HeaderRules.Entry] = [], add: [HeaderRules.Entry] = [], remove: [String] = []
        func checkName(_ name: String, _ part: String) throws(ConfigError) {
            guard HeaderRules.isFieldName(name) else { throw fail("\(key).\(part)", "\"\(name)\" is not a field name (RFC 9110 token)") }
            let lower = name.lowercased()
            if HeaderRules.framingFields.contains(lower) {
                throw fail("\(key).\(part)", "\(name) frames the message; Larder writes it itself")
            }
            if towardsClients && HeaderRules.answerFields.contains(lower) {
                throw fail("\(key).\(part)", "\(name) is written by Larder on every answer; it cannot be set or removed")
            }
        }
        for part in table.keys {
            guard let item = table[part] else { continue }
            switch part {
            case "set", "add":
                guard item.type == .table, let fields = item.table else {
                    throw fail("\(key).\(part)", "expected a table of field names and string values, e.g. { \"X-Env\" = \"prod\" }")
                }
                for name in fields.keys {
                    try checkName(name, part)
                    guard let text = fields[name]?.string else { throw fail("\(key).\(part)", "the value of \(name) must be a string") }
                    switch FieldValue.parse(text) {
                    case .success(let parsed):
                        let entry = HeaderRules.Entry(name: name, value: parsed)
                        if part == "set" { set.append(entry) } else { add.append(entry) }
                    case .failure(let problem): throw fail("\(key).\(part)", "\(name): " + problem.message)
                    }
                }
            case "remove":
                guard item.type == .array, let items = item.array, let names = strings(items) else {
                    throw fail("\(key).remove", "expected a list of field names, e.g. [\"Server\"]")
                }
                for name in names { try checkName(name, part) }
                remove = names
            default:
                throw fail("\(key).\(part)", UnknownKey.message("\(key) part", part, known: ["set", "add", "remove"]))
            }
        }
        // TOML tables have no order: set and add apply in name order, the same on every start.
        set.sort { $0.lowercased < $1.lowercased }
        add.sort { $0.lowercased < $1.lowercased }
        return HeaderRules(set: set, add: add, remove: remove)
    }

    private static func rateLimit(_ value: TOMLValueConvertible, fail: Fail) throws(ConfigError) -> RateLimit {
        let key = "rate_limit"
        guard value.type == .table, let table = value.table else {
            throw fail(key, "expected a table such as { requests = 20, per = \"1s\", burst = 10 }")
        }
        for part in table.keys where !["requests", "per", "burst", "key"].contains(part) {
            throw fail("\(key).\(part)", UnknownKey.message("rate_limit part", part, known: ["requests", "per", "burst", "key"]))
        }
        guard let requests = table["requests"]?.int, (1...1_000_000).contains(requests) else {
            throw fail("\(key).requests", "expected a number of requests from 1 to 1000000")
        }
        var period = 1000
        if let item = table["per"] {
            guard let text = item.string, let ms = Units.parseDurationMilliseconds(text), ms >= 1, ms <= 86_400_000 else {
                throw fail("\(key).per", "expected a duration from 1ms to 1d, e.g. \"1s\" or \"1m\"")
            }
            period = ms
        }
        var burst = 0
        if let item = table["burst"] {
            guard let n = item.int, (0...1_000_000).contains(n) else { throw fail("\(key).burst", "expected a number from 0 to 1000000") }
            burst = n
        }
        var limitKey = RateLimit.Key.address
        if let item = table["key"] {
            guard let text = item.string else { throw fail("\(key).key", "expected \"address\" or \"header:NAME\"") }
            if text.hasPrefix("header:"), HeaderRules.isFieldName(String(text.dropFirst(7))) {
                limitKey = .header(text.dropFirst(7).lowercased())
            } else if text != "address" {
                throw fail("\(key).key", "expected \"address\" or \"header:NAME\", e.g. \"header:X-Api-Key\"")
            }
        }
        return RateLimit(requests: requests, periodMilliseconds: period, burst: burst, key: limitKey)
    }
}

extension Settings {
    /// The global rules, and every route with the rules its requests are
    /// under (its own over the global ones), as the workers get them.
    public func routesWithRules() -> (global: EdgeRules?, routes: [Route]) {
        let global = edge.rules(over: nil)
        return (global, routes.map { route in
            var route = route
            route.rules = route.edge.isEmpty ? global : route.edge.rules(over: global)
            return route
        })
    }
}

extension EdgeConfig {
    /// The edge keys a scope sets, as `check-config --print` writes them.
    public static func render(_ edge: EdgeSettings) -> String {
        var out = ""
        func entries(_ list: [HeaderRules.Entry]) -> String {
            "{ " + list.map { "\(EffectiveConfig.quoted($0.name)) = \(EffectiveConfig.quoted($0.value.spelled))" }.joined(separator: ", ") + " }"
        }
        func rules(_ key: String, _ rules: HeaderRules?) {
            guard let rules else { return }
            var parts: [String] = []
            if !rules.sets.isEmpty { parts.append("set = " + entries(rules.sets)) }
            if !rules.adds.isEmpty { parts.append("add = " + entries(rules.adds)) }
            if !rules.removes.isEmpty { parts.append("remove = " + EffectiveConfig.list(rules.removes)) }
            out += "\(key) = { \(parts.joined(separator: ", ")) }\n"
        }
        rules("request_headers", edge.requestHeaders)
        rules("response_headers", edge.responseHeaders)
        if let allow = edge.allow { out += "allow = \(EffectiveConfig.list(allow.prefixes.map(\.description)))\n" }
        if let deny = edge.deny { out += "deny = \(EffectiveConfig.list(deny.prefixes.map(\.description)))\n" }
        if let limit = edge.rateLimit {
            var key = "address"
            if case .header(let name) = limit.key { key = "header:" + name }
            out += "rate_limit = { requests = \(limit.requests), per = \(EffectiveConfig.quoted("\(limit.periodMilliseconds)ms")), "
                + "burst = \(limit.burst), key = \(EffectiveConfig.quoted(key)) }\n"
        }
        if let strip = edge.stripCookies { out += "strip_cookies = \(strip)\n" }
        if let names = edge.keyCookies { out += "key_cookies = \(EffectiveConfig.list(names))\n" }
        return out
    }

    /// The global-only keys, as `check-config --print` writes them.
    public static func renderGlobal(_ settings: Settings) -> String {
        var out = render(settings.edge)
        if let list = settings.proxy.trustedProxies { out += "trusted_proxies = \(EffectiveConfig.list(list.prefixes.map(\.description)))\n" }
        if let list = settings.adminAllow { out += "admin_allow = \(EffectiveConfig.list(list.prefixes.map(\.description)))\n" }
        return out
    }
}
