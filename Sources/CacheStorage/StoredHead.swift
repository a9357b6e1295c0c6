import CacheSemantics
import HTTP1
import HTTPHeaders

/// Everything stored about a response but its body, decided once when the
/// response arrives (`StoredResponseBuilder` in Proxy): the head a hit
/// sends, the directives and lifetime it is judged by, what selects it
/// (Vary) and what purges it (tags). Every tier keeps exactly this, so any
/// tier turns it back into a `CachedResponse` without the proxy's rules.
public struct StoredHead: Equatable, Sendable {
    public var key: String
    public var status: Int
    /// Status line and the fields a hit sends, serialized; no Content-Length
    /// (written beside it once the body's length is known).
    public var headPrefix: [UInt8]
    /// Stored fields a hit does not send (targeted cache-control fields).
    public var otherFields: HeaderFields
    public var timing: ResponseTiming
    /// Freshness lifetime in seconds (0: none left, as after a soft purge).
    public var lifetime: Int
    public var directives: PackedCacheControl
    public var hasValidator: Bool
    /// Content-Encoding gzip, zstd or br; nil when not known (a file
    /// written before this was recorded): the head is then read for it.
    public var coding: StoredCoding?
    /// Vary field names (sorted) and the request's normalized values for them.
    public var varyNames: [String]
    public var varyValues: [String?]
    /// Purge tags, sorted.
    public var tags: [String]

    public init(key: String, status: Int, headPrefix: [UInt8], otherFields: HeaderFields = [], timing: ResponseTiming,
                lifetime: Int, directives: PackedCacheControl, hasValidator: Bool, varyNames: [String] = [],
                varyValues: [String?] = [], tags: [String] = [], coding: StoredCoding? = nil) {
        self.key = key
        self.status = status
        self.headPrefix = headPrefix
        self.otherFields = otherFields
        self.timing = timing
        self.lifetime = lifetime
        self.directives = directives
        self.hasValidator = hasValidator
        self.varyNames = varyNames
        self.varyValues = varyValues
        self.tags = tags
        self.coding = coding
    }

    /// Whether a response with this status carries a Content-Length (RFC
    /// 9110 section 8.6: not 204, and a 304 repeats none).
    public var hasLengthField: Bool { status != 204 && status != 304 }
}

extension StoredHead {
    /// This piece's head made to say `piece` of the same representation
    /// (pieces joined on disk): its Content-Range names `piece`, or, when
    /// `piece` is all of it, the head is the 200 it amounts to, without
    /// one. Every other field line is kept as stored.
    public func holding(_ piece: PartialContent.Piece) -> StoredHead {
        var head = self
        head.status = piece.isWhole ? 200 : 206
        var prefix: [UInt8] = []
        prefix.reserveCapacity(headPrefix.count + 16)
        let reason = piece.isWhole ? "OK" : headPrefix.withUnsafeBytes { HeadFields.reason(in: $0) }
        ResponseSerializer.appendStatusLine(head.status, reason: reason, to: &prefix)
        headPrefix.withUnsafeBytes { HeadFields.appendLines(of: $0, except: "content-range", to: &prefix) }
        if !piece.isWhole { ResponseSerializer.appendField("content-range", piece.contentRange, to: &prefix) }
        head.headPrefix = prefix
        return head
    }
}
