/// What a web page in a visitor's browser must not do to the admin API
/// (which, with the default config, listens on loopback without a token):
/// send it a state-changing request from another site without a
/// preflight (a form, or `fetch` with `mode: "no-cors"`), or read it
/// through a name the page's site controls (DNS rebinding: `Host:
/// evil.example` resolving to 127.0.0.1). A pure decision on the
/// request's fields; command-line tools, curl and the status page (same
/// origin) pass.
public struct AdminRequestGuard: Sendable {
    /// Host names (lowercased, without port) taken besides IP literals and
    /// `localhost` (`admin_hosts`).
    public var allowedHosts: Set<String>

    public init(allowedHosts: [String] = []) {
        self.allowedHosts = Set(allowedHosts.map { $0.lowercased() })
    }

    /// The reason to refuse (403), or nil. `tokenRequired`: the admin API
    /// asks for a token, which a rebinding page cannot send (the status
    /// page's cookie belongs to the admin API's own name), so any Host
    /// name goes (Prometheus scraping `cache-1.internal:8081`, say).
    public func refusal(method: String, host: String?, origin: String?, fetchSite: String?, contentType: String?,
                        tokenRequired: Bool = false) -> String? {
        if !tokenRequired, let host, let name = Self.name(ofHost: host), !isAllowed(name) {
            return "Host \(name) is not an address of this admin API (a DNS rebinding attempt?); "
                + "add it to admin_hosts to allow it"
        }
        guard method != "GET" && method != "HEAD" else { return nil }
        if let site = fetchSite?.lowercased(), site != "same-origin", site != "none" {
            return "a \(site) request from a web page may not change anything here"
        }
        if let origin, origin == "null" || Self.authority(ofOrigin: origin) != host?.lowercased() {
            return "a request from the web page at \(origin) may not change anything here"
        }
        if let type = contentType.map(Self.mediaType), Self.formTypes.contains(type) {
            return "a form's content type (\(type)): admin requests take no body; a web page may send one from any site"
        }
        return nil
    }

    /// What a page can POST cross-site without a preflight (the
    /// CORS-safelisted request content types).
    static let formTypes: Set<String> = ["application/x-www-form-urlencoded", "multipart/form-data", "text/plain"]

    private func isAllowed(_ name: String) -> Bool {
        name == "localhost" || name.hasPrefix("[") || Self.isIPv4(name) || allowedHosts.contains(name)
    }

    /// The name part of a Host value (lowercased; an IPv6 literal with its
    /// brackets); nil when empty.
    static func name(ofHost host: String) -> String? {
        let value = host.lowercased()
        if value.hasPrefix("["), let close = value.firstIndex(of: "]") { return String(value[...close]) }
        let name = value.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? value
        return name.isEmpty ? nil : name
    }

    static func isIPv4(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCIIDigit) && Int($0)! <= 255 }
    }

    /// `scheme://host[:port]` → `host[:port]`, lowercased.
    static func authority(ofOrigin origin: String) -> String? {
        guard let range = origin.firstRange(of: "://") else { return nil }
        return String(origin[range.upperBound...]).lowercased()
    }

    static func mediaType(_ value: String) -> String {
        (value.split(separator: ";", maxSplits: 1).first ?? "").filter { $0 != " " && $0 != "\t" }.lowercased()
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
