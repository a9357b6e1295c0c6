import CacheSemantics
import HTTP1
import Routing

/// What a request that may be answered from the cache does after its
/// lookup: the policy's action (`RequestPolicy.action`) turned into what
/// Larder does, counts and says in Cache-Status. A pure function; the
/// driver (`Exchange.start`) carries it out.
enum LookupPlan: Equatable {
    /// Serve the stored variant `index`; `stale` counts it as a stale hit,
    /// `refresh` revalidates it in the background afterwards.
    case serve(index: Int, age: Int, ttl: Int, stale: Bool, refresh: Bool)
    /// 504 without asking the upstream (cacheOnly, only-if-cached).
    case cacheOnlyMiss(detail: String, message: String)
    case forward(Forward)

    /// How to go upstream.
    struct Forward: Equatable {
        var reason: CacheStatus.Forward
        /// The stored variant to validate (when it has a validator and the
        /// request is a GET).
        var validate: Int?
        /// The stale variant that may stand in if the upstream fails
        /// (stale-if-error).
        var staleCandidate: Int?
        /// networkElseCache: the variant served, however stale, if the upstream fails.
        var fallback: Int?
        /// reloadIgnoringLocalAndRemoteCacheData: Cache-Control: no-cache upstream.
        var noCacheUpstream = false
        /// Whether the fetch may be shared with other requests for the
        /// URL (a reload the policy asked for is never shared).
        var collapse = true
    }

    /// Whether the fleet's shared tier may answer instead: nothing usable
    /// stored here, and the policy lets a stored response answer (a reload
    /// does not; a validation does, since the fleet may hold a fresher copy).
    var mayAskFleet: Bool {
        switch self {
        case .serve: return false
        case .cacheOnlyMiss: return true
        case .forward(let how): return how.collapse
        }
    }

    static func make(_ action: PolicyAction, chosenByClient: Bool, onlyIfCached: Bool) -> LookupPlan {
        switch action {
        case .serveStored(let index, let age, let ttl):
            return .serve(index: index, age: age, ttl: ttl, stale: ttl <= 0, refresh: false)
        case .serveStoredAndRefresh(let index, let age, let ttl):
            return .serve(index: index, age: age, ttl: ttl, stale: ttl <= 0, refresh: true)
        case .gatewayTimeout:
            return .cacheOnlyMiss(detail: "cache-only",
                                  message: "nothing stored for this URL and the policy forbids asking the upstream")
        case .forward(let validate, let noCacheUpstream, let fallback):
            // A reload the client asked for, or one the configuration imposes.
            return .forward(Forward(reason: chosenByClient ? .request : .bypass, validate: validate, fallback: fallback,
                                    noCacheUpstream: noCacheUpstream, collapse: false))
        case .followProtocol(.fresh(let index, let age, let ttl)):
            return .serve(index: index, age: age, ttl: ttl, stale: false, refresh: false)
        case .followProtocol(.staleWhileRevalidate(let index, let age, let ttl)),
             .followProtocol(.staleWithinGrace(let index, let age, let ttl)):
            return .serve(index: index, age: age, ttl: ttl, stale: true, refresh: true)
        case .followProtocol(.stale(let index, _, _, let forced)):
            return miss(Forward(reason: forced ? .request : .stale, validate: index, staleCandidate: index),
                        onlyIfCached: onlyIfCached)
        case .followProtocol(.miss(let varyMiss)):
            return miss(Forward(reason: varyMiss ? .varyMiss : .uriMiss), onlyIfCached: onlyIfCached)
        }
    }

    /// A stored body that vanished between lookup and answer: a miss.
    static func afterVanishedBody(onlyIfCached: Bool) -> LookupPlan {
        miss(Forward(reason: .uriMiss), onlyIfCached: onlyIfCached)
    }

    /// RFC 9111 section 5.2.1.7: with nothing usable stored, only-if-cached
    /// forbids going upstream.
    private static func miss(_ forward: Forward, onlyIfCached: Bool) -> LookupPlan {
        onlyIfCached ? .cacheOnlyMiss(detail: "only-if-cached", message: "only-if-cached: no usable stored response") : .forward(forward)
    }
}

/// The request's policy: the client's Larder-Cache-Policy where the route
/// (or the configuration) lets clients choose, else the configured one.
enum PolicyChoice: Equatable {
    case chosen(RequestPolicy, byClient: Bool)
    /// An unknown name: answered 400 with this message.
    case unknown(message: String)

    /// `route`'s policy and permission, else the configuration's (its two
    /// values passed alone: the whole configuration would be copied).
    static func make(for request: RequestHead, route: RouteFacts?, configured: RequestPolicy, clientsMayChoose: Bool) -> PolicyChoice {
        make(clientMayChoose: route?.allowClientPolicy ?? clientsMayChoose, header: request.combinedHeader("larder-cache-policy"),
             configured: route?.policy ?? configured)
    }

    static func make(clientMayChoose: Bool, header: @autoclosure () -> String?, configured: RequestPolicy) -> PolicyChoice {
        guard clientMayChoose, let name = header() else { return .chosen(configured, byClient: false) }
        guard let chosen = RequestPolicy(name: name) else {
            return .unknown(message: "unknown Larder-Cache-Policy \"\(name)\"; valid names: "
                + RequestPolicy.validNames.joined(separator: ", "))
        }
        return .chosen(chosen, byClient: true)
    }
}

extension RequestFacts {
    /// What a lookup needs of the request: its Cache-Control (`directives`,
    /// parsed once by the caller), Pragma when honoured, its fields for Vary.
    init(_ request: RequestHead, _ directives: CacheControl, honouringPragma: Bool) {
        let pragma = honouringPragma && (request.combinedHeader("pragma")?.lowercased().contains("no-cache") ?? false)
        self.init(cacheControl: directives, pragmaNoCache: pragma) { [headers = request.headers] in VariantValue.of($0, in: headers) }
    }
}
