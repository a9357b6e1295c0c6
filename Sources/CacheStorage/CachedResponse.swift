import CacheSemantics

/// A stored response, immutable once built and shared between workers.
///
/// `headPrefix` is the status line and stored header fields, serialized when
/// the response was stored; a hit appends Age, Date and Cache-Status and the
/// blank line, then `body`, in one writev.
public final class CachedResponse: StoredResponseFacts, @unchecked Sendable {
    public let key: String
    public let status: Int
    /// The upstream's reason phrase, if it sent one.
    public let reason: String?
    public let headPrefix: Bytes
    public let body: Bytes
    /// For a large response kept on disk only: where its body is. `body`
    /// is then empty and hits are written with sendfile.
    public let bodyFile: FileBody?
    /// Response fields as stored (lowercased names), for validation and HEAD.
    public let headers: [(name: String, value: String)]
    public let timing: ResponseTiming
    public let correctedInitialAge: Int
    /// Freshness lifetime in seconds.
    public let lifetime: Int
    public let cacheControl: CacheControl
    /// Vary field names (sorted) and the request's normalized values for them.
    public let varyNames: [String]
    public let varyValues: [String?]
    /// Purge tags (sorted, no duplicates).
    public let tags: [String]

    public init(key: String, status: Int, reason: String? = nil, headPrefix: Bytes, body: Bytes, bodyFile: FileBody? = nil,
                headers: [(name: String, value: String)],
                timing: ResponseTiming, lifetime: Int, cacheControl: CacheControl,
                varyNames: [String], varyValues: [String?], tags: [String] = []) {
        self.key = key
        self.status = status
        self.reason = reason
        self.headPrefix = headPrefix
        self.body = body
        self.bodyFile = bodyFile
        self.headers = headers
        self.timing = timing
        self.correctedInitialAge = Freshness.correctedInitialAge(timing)
        self.lifetime = lifetime
        self.cacheControl = cacheControl
        self.varyNames = varyNames
        self.varyValues = varyValues
        self.tags = tags
    }

    /// The same response with no freshness left (a soft purge): it is
    /// revalidated before reuse, or served stale where the stale rules allow.
    public func markedStale() -> CachedResponse {
        CachedResponse(key: key, status: status, reason: reason, headPrefix: headPrefix, body: body, bodyFile: bodyFile,
                       headers: headers, timing: timing, lifetime: 0, cacheControl: cacheControl,
                       varyNames: varyNames, varyValues: varyValues, tags: tags)
    }

    /// Bookkeeping bytes charged per entry beyond its head and body: the
    /// object, its index slot and list links, allocator rounding (measured
    /// with bench/memory.sh: about 1.2 KiB per small entry in all).
    public static let overheadBytes = 768

    /// What this entry counts against the memory limit.
    public var costBytes: Int {
        headPrefix.count + body.count + key.utf8.count + Self.overheadBytes
            + headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 32 }
            + varyNames.reduce(0) { $0 + $1.utf8.count + 16 } + varyValues.reduce(0) { $0 + ($1?.utf8.count ?? 0) + 16 }
            + tags.reduce(0) { $0 + $1.utf8.count + 48 }
    }

    /// The body's length, wherever it is.
    public var bodyLength: Int { bodyFile?.length ?? body.count }

    public func currentAge(now: Int64) -> Int {
        Freshness.currentAge(correctedInitialAge: correctedInitialAge, responseTime: timing.responseTime, now: now)
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }

    public var etag: String? { header("etag") }
    public var lastModified: String? { header("last-modified") }
    /// Whether a conditional request can validate this response.
    public var hasValidator: Bool { etag != nil || lastModified != nil }
}

/// A body stored in a file: `length` bytes at `offset` of `path`.
public struct FileBody: Equatable, Sendable {
    public var path: String
    public var offset: Int
    public var length: Int
    public init(path: String, offset: Int, length: Int) {
        self.path = path
        self.offset = offset
        self.length = length
    }
}
