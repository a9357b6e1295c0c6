/// One response on its way into the store, whichever tier ends up holding
/// it: the body collects in memory while it fits the first tier's objects,
/// then streams to the first tier that takes streams (the disk), and
/// `commit` makes it findable. Used from one worker thread; a value the
/// exchange owns (no allocation of its own but the body's).
public struct StoreWriter {
    public let head: StoredHead
    private let store: TieredStore
    /// The fetch's miss handler, which offers what is committed to the fleet.
    private let handler: MissHandler?
    private let fetchedSince: UInt64
    private let firstTierOnly: Bool
    private let storedAt: Int64
    private var body = ByteAccumulator()
    private var stream: (any TierStream)?
    private var streamLimit = 0
    /// A streamed body of at most this many bytes is also kept in memory,
    /// so that it can be `committed` (offered to the fleet's shared tier,
    /// whose objects may be larger than the memory tier's).
    private let keepStreamedUpTo: Int
    private var kept: ByteAccumulator?
    /// Body bytes taken so far.
    public private(set) var bodyBytes = 0
    /// Gave up (too large, a tier failed, a purge won): nothing will be stored.
    public private(set) var abandoned = false
    /// The response as committed, when a tier took it and its body was
    /// held in memory (or streamed, and kept: `keepStreamedUpTo`): what a
    /// fleet's shared tier is offered.
    public private(set) var committed: CachedResponse?

    /// `expectedLength`: the body's length when the upstream said it (room
    /// is made once, or it streams from the first byte).
    public init(_ head: StoredHead, into store: TieredStore, fetchedSince: UInt64, storedAt: Int64, firstTierOnly: Bool,
                expectedLength: Int?, keepStreamedUpTo: Int = 0) {
        self.init(head, through: nil, into: store, fetchedSince: fetchedSince, storedAt: storedAt, firstTierOnly: firstTierOnly,
                  expectedLength: expectedLength, keepStreamedUpTo: keepStreamedUpTo)
    }

    init(_ head: StoredHead, through handler: MissHandler?, into store: TieredStore, fetchedSince: UInt64, storedAt: Int64,
         firstTierOnly: Bool, expectedLength: Int?, keepStreamedUpTo: Int) {
        self.handler = handler
        self.head = head
        self.store = store
        self.fetchedSince = fetchedSince
        self.storedAt = storedAt
        self.firstTierOnly = firstTierOnly
        self.keepStreamedUpTo = keepStreamedUpTo
        guard let expectedLength, expectedLength > 0 else { return }
        if expectedLength <= store.first.maxObjectBytes {
            body.reserve(expectedLength)
        } else if !startStream() || expectedLength > streamLimit {
            abort()
        } else if expectedLength <= keepStreamedUpTo {
            kept = ByteAccumulator()
            kept?.reserve(expectedLength)
        }
    }

    /// Whether the body goes to a streaming tier (not collected in memory).
    public var isStreaming: Bool { stream != nil }

    /// The body collected so far (empty once streaming).
    public var collected: UnsafeRawBufferPointer { body.buffer }

    /// The largest body this store keeps for a response.
    public static func largestBody(in store: TieredStore, firstTierOnly: Bool) -> Int {
        max(store.first.maxObjectBytes, firstTierOnly ? 0 : store.largestStreamedObject)
    }

    private mutating func startStream() -> Bool {
        guard !firstTierOnly, let (stream, limit) = store.beginStream(head, storedAt: storedAt, fetchedSince: fetchedSince) else {
            return false
        }
        self.stream = stream
        streamLimit = limit
        return true
    }

    /// Takes body bytes; false once it has given up (what it had is freed).
    @discardableResult
    public mutating func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !abandoned else { return false }
        bodyBytes += bytes.count
        if let stream {
            if bodyBytes > streamLimit || !stream.append(bytes) { abort() }
            keep(bytes)
            return !abandoned
        }
        guard bodyBytes > store.first.maxObjectBytes else {
            body.append(bytes)
            return true
        }
        // Outgrew the first tier: what came so far, then the rest, to a stream.
        guard startStream(), bodyBytes <= streamLimit, let stream else {
            abort()
            return false
        }
        let written = stream.append(body.buffer) && stream.append(bytes)
        if bodyBytes <= keepStreamedUpTo {
            // The collected bytes move to `kept` (the accumulator owns its memory).
            kept = body
            body = ByteAccumulator()
            kept?.append(bytes)
        }
        body.discard()
        if !written { abort() }
        return !abandoned
    }

    /// Keeps streamed bytes while the body fits `keepStreamedUpTo`.
    private mutating func keep(_ bytes: UnsafeRawBufferPointer) {
        guard kept != nil else { return }
        if abandoned || bodyBytes > keepStreamedUpTo {
            kept?.discard()
            kept = nil
        } else {
            kept?.append(bytes)
        }
    }

    /// When the tier being streamed to is behind with writing: keeps
    /// `resume` (called from any thread once it caught up) and returns true;
    /// the caller holds further bytes until then.
    public func pauseIfBacklogged(_ resume: @escaping @Sendable () -> Void) -> Bool {
        stream?.pauseIfBacklogged(resume) ?? false
    }

    /// The body is complete: stores the response, and offers it to the
    /// fleet through the fetch's miss handler. Returns whether a tier took it.
    @discardableResult
    public mutating func commit() -> Bool {
        guard !abandoned else { return false }
        abandoned = true
        if let stream {
            stream.commit()
            self.stream = nil
            if let buffer = kept?.buffer {
                committed = CachedResponse.make(head: head, body: buffer)
                kept?.discard()
                kept = nil
            }
            if let committed { handler?.share(committed) }
            return true
        }
        return insert(CachedResponse.make(head: head, body: body.buffer))
    }

    /// The body is complete and held in memory (not `isStreaming`): stores
    /// (and offers) it recoded, as `head` and `recoded` say (a copy stored compressed),
    /// instead of as collected.
    @discardableResult
    public mutating func commit(as head: StoredHead, body recoded: UnsafeRawBufferPointer) -> Bool {
        guard !abandoned, stream == nil else { return commit() }
        abandoned = true
        return insert(CachedResponse.make(head: head, body: recoded))
    }

    private mutating func insert(_ entry: CachedResponse) -> Bool {
        body.discard()
        guard store.insert(entry, firstTierOnly: firstTierOnly, fetchedSince: fetchedSince) else { return false }
        committed = entry
        handler?.share(entry)
        return true
    }

    /// Nothing will be stored: frees the body, abandons a stream.
    public mutating func abort() {
        guard !abandoned else { return }
        abandoned = true
        body.discard()
        kept?.discard()
        kept = nil
        stream?.abort()
        stream = nil
    }
}
