import Synchronization
import HTTPHeaders

/// The edge controls one request is under: its route's, over the global
/// ones. Built once from the configuration, immutable, read by every
/// worker; requests reach it without reference counting (`RouteFacts`).
/// The order is fixed: access list, rate limit, request rules, the
/// cache, response rules.
public final class EdgeRules: @unchecked Sendable, Equatable {
    public let access: AccessList
    public let rateLimit: RateLimiter?
    public let requestHeaders: HeaderRules
    public let responseHeaders: HeaderRules
    public let stripCookies: Bool
    /// Cookie names whose values join the cache key (as variant fields).
    public let keyCookies: [String]
    /// Whether a rule needs a request id (generated only then).
    public let usesRequestID: Bool
    /// What the hit path reads of the response rules: the names dropped,
    /// the fields set and added when they hold no variable (nil: rendered
    /// per request), whether there are any.
    public let responseDrops: FieldNames
    public let responseLiteralFields: [HeaderField]?
    /// Those fields as HTTP/1.1 lines ("name: value\r\n"), written with one copy.
    public let responseLiteralLines: UnsafeRawBufferPointer
    public let editsResponses: Bool
    /// Unique to this object in the process (a cache of its results is
    /// keyed by it; an address could be a freed one's).
    public let generation: UInt64
    private static let generations = Atomic<UInt64>(0)

    public init(access: AccessList = AccessList(), rateLimit: RateLimiter? = nil, requestHeaders: HeaderRules = HeaderRules(),
                responseHeaders: HeaderRules = HeaderRules(), stripCookies: Bool = false, keyCookies: [String] = []) {
        self.access = access
        self.rateLimit = rateLimit
        self.requestHeaders = requestHeaders
        self.responseHeaders = responseHeaders
        self.stripCookies = stripCookies
        self.keyCookies = keyCookies
        usesRequestID = requestHeaders.usesRequestID || responseHeaders.usesRequestID
        responseDrops = FieldNames(responseHeaders.dropped)
        responseLiteralFields = responseHeaders.literalFields
        let lines = (responseHeaders.literalFields ?? []).flatMap { Array("\($0.name): \($0.value)\r\n".utf8) }
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: lines.count, alignment: 1)
        copy.copyBytes(from: lines)
        responseLiteralLines = UnsafeRawBufferPointer(copy)
        editsResponses = !responseHeaders.isEmpty
        hasAccessList = !access.isEmpty
        denied = PrefixTable(access.deny)
        allowed = PrefixTable(access.allow)
        hasAllowList = access.allow != nil
        limiter = rateLimit.map { Unmanaged.passUnretained($0) }
        gates = !access.isEmpty || rateLimit != nil
        generation = Self.generations.wrappingAdd(1, ordering: .relaxed).newValue
    }

    deinit {
        responseDrops.deallocate()
        denied.deallocate()
        allowed.deallocate()
        responseLiteralLines.deallocate()
    }

    /// Whether these rules do anything at all.
    public var isEmpty: Bool {
        access.isEmpty && rateLimit == nil && requestHeaders.isEmpty && responseHeaders.isEmpty && !stripCookies && keyCookies.isEmpty
    }

    /// Whether the request may be stopped before any lookup (403, 429);
    /// whether it has an access list.
    public let gates: Bool
    public let hasAccessList: Bool

    /// The access list as tables, whether it has an allow list, and the
    /// limiter, for the request path (no reference counted there).
    private let denied: PrefixTable, allowed: PrefixTable
    private let hasAllowList: Bool
    public let limiter: Unmanaged<RateLimiter>?

    /// The access list's verdict: deny first, then allow.
    @inline(__always)
    public func admits(_ address: IPAddress) -> Bool {
        guard hasAccessList else { return true }
        if denied.contains(address) { return false }
        return !hasAllowList || allowed.contains(address)
    }

    public static func == (a: EdgeRules, b: EdgeRules) -> Bool {
        a.access == b.access && a.rateLimit?.limit == b.rateLimit?.limit && a.requestHeaders == b.requestHeaders
            && a.responseHeaders == b.responseHeaders && a.stripCookies == b.stripCookies && a.keyCookies == b.keyCookies
    }
}

/// The edge keys as the configuration gives them, for the global scope
/// or one route: nil where the key is absent.
public struct EdgeSettings: Equatable, Sendable {
    public var requestHeaders: HeaderRules?
    public var responseHeaders: HeaderRules?
    public var allow: AddressList?
    public var deny: AddressList?
    public var rateLimit: RateLimit?
    public var stripCookies: Bool?
    public var keyCookies: [String]?

    public init() {}

    public var isEmpty: Bool { self == EdgeSettings() }

    /// The rules of a scope with these settings over `base`'s (nil: the
    /// global scope). A route's access lists, rate limit and cookie rules
    /// replace the global ones; its header rules apply over them. The
    /// global limiter is shared by routes that do not set their own, so a
    /// client's requests count once wherever they go. Nil when nothing applies.
    public func rules(over base: EdgeRules?) -> EdgeRules? {
        var access = base?.access ?? AccessList()
        if allow != nil || deny != nil { access = AccessList(allow: allow, deny: deny) }
        let limiter = rateLimit.map { RateLimiter($0) } ?? base?.rateLimit
        let request = requestHeaders.map { $0.applied(over: base?.requestHeaders ?? HeaderRules()) } ?? base?.requestHeaders ?? HeaderRules()
        let response = responseHeaders.map { $0.applied(over: base?.responseHeaders ?? HeaderRules()) } ?? base?.responseHeaders ?? HeaderRules()
        let rules = EdgeRules(access: access, rateLimit: limiter, requestHeaders: request, responseHeaders: response,
                              stripCookies: stripCookies ?? base?.stripCookies ?? false, keyCookies: keyCookies ?? base?.keyCookies ?? [])
        return rules.isEmpty ? nil : rules
    }
}
