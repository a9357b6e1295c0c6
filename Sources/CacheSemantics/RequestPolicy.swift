/// Per-request cache policies, as Apple's URLCache offers them
/// (docs/routes-and-policies.md).
public enum RequestPolicy: String, CaseIterable, Sendable {
    case useProtocolCachePolicy
    case reloadIgnoringLocalCacheData
    case reloadIgnoringLocalAndRemoteCacheData
    case reloadRevalidatingCacheData
    case returnCacheDataElseLoad
    case returnCacheDataDontLoad
    case cacheThenFetch
    case networkElseCache

    /// Aliases accepted besides the names.
    static let aliases: [String: RequestPolicy] = [
        "networkonly": .reloadIgnoringLocalCacheData,
        "cacheelsefetch": .returnCacheDataElseLoad,
        "cacheonly": .returnCacheDataDontLoad,
    ]

    /// A policy by name or alias, case-insensitively; nil if unknown.
    public init?(name: String) {
        let lower = name.trimmingWhitespaceAndTabs().lowercased()
        if let policy = Self.allCases.first(where: { $0.rawValue.lowercased() == lower }) ?? Self.aliases[lower] {
            self = policy
        } else {
            return nil
        }
    }

    /// Every accepted name, for error messages.
    public static var validNames: [String] {
        allCases.map(\.rawValue) + ["networkOnly", "cacheElseFetch", "cacheOnly"]
    }
}

/// What the proxy does for a GET/HEAD under a policy, given the lookup.
public enum PolicyAction: Equatable, Sendable {
    /// RFC 9111 as usual: act on the lookup outcome.
    case followProtocol(LookupOutcome)
    /// Serve the stored variant at `index` as it is, however stale.
    case serveStored(index: Int, age: Int, ttl: Int)
    /// Serve it at once and refresh it in the background.
    case serveStoredAndRefresh(index: Int, age: Int, ttl: Int)
    /// Go upstream. `validate`: the stored variant to revalidate
    /// conditionally; `noCacheUpstream`: ask upstream caches to reload too;
    /// `fallback`: the stored variant to serve if the upstream fails.
    case forward(validate: Int?, noCacheUpstream: Bool, fallback: Int?)
    /// Nothing stored and the upstream must not be asked: 504.
    case gatewayTimeout
}

extension RequestPolicy {
    /// The decision for `policy` (pure: the proxy only carries it out).
    public func action(for outcome: LookupOutcome) -> PolicyAction {
        let stored: (index: Int, age: Int, ttl: Int)?
        switch outcome {
        case .miss: stored = nil
        case .fresh(let i, let a, let t), .stale(let i, let a, let t, _), .staleWhileRevalidate(let i, let a, let t),
             .staleWithinGrace(let i, let a, let t):
            stored = (i, a, t)
        }
        switch self {
        case .useProtocolCachePolicy:
            return .followProtocol(outcome)
        case .reloadIgnoringLocalCacheData:
            return .forward(validate: nil, noCacheUpstream: false, fallback: nil)
        case .reloadIgnoringLocalAndRemoteCacheData:
            return .forward(validate: nil, noCacheUpstream: true, fallback: nil)
        case .reloadRevalidatingCacheData:
            return .forward(validate: stored?.index, noCacheUpstream: false, fallback: nil)
        case .returnCacheDataElseLoad:
            guard let stored else { return .followProtocol(outcome) }
            return .serveStored(index: stored.index, age: stored.age, ttl: stored.ttl)
        case .returnCacheDataDontLoad:
            guard let stored else { return .gatewayTimeout }
            return .serveStored(index: stored.index, age: stored.age, ttl: stored.ttl)
        case .cacheThenFetch:
            guard let stored else { return .followProtocol(outcome) }
            return .serveStoredAndRefresh(index: stored.index, age: stored.age, ttl: stored.ttl)
        case .networkElseCache:
            return .forward(validate: nil, noCacheUpstream: false, fallback: stored?.index)
        }
    }
}
