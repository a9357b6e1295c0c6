import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Synchronization
import HTTPHeaders
import Threads

/// Request collapsing across workers: while one request (the leader) fetches
/// a URL from the upstream, other cacheable requests for it wait instead of
/// sending their own.
///
/// - When the leader's response turns out storable, it offers to share it.
///   Only once some request waits (most misses have none, and sharing costs
///   allocations and locks on every miss) does it publish a `SharedFetch`
///   with the body so far: every waiter (and every request for the URL
///   arriving later, until the fetch ends) streams the response from it as
///   it arrives (`Cache-Status: ...; collapsed`).
/// - When the leader finishes without publishing (not storable, a 304, an
///   error), each waiter is woken on its own loop and looks the URL up
///   again: it is served what the leader stored, or fetches on its own.
public final class Collapser: Sendable {
    private struct Waiter: @unchecked Sendable {
        let loop: EventLoop
        let wake: (SharedFetch?) -> Void
    }

    /// A leader's offer to share: `share` runs on the leader's loop.
    private struct Offer: @unchecked Sendable {
        let loop: EventLoop
        let share: () -> Void
    }

    private struct Entry {
        /// Just inserted by `lead`: its caller leads.
        var isNew = false
        var waiters: [Waiter] = []
        var shared: SharedFetch?
        var offer: Offer?
    }

    private let inFlight = Locked<[String: Entry]>([:])
    /// Keys with a background refresh running, on any worker.
    private let refreshing = Locked<Set<String>>([])

    public init() {}

    /// Claims the one background refresh of `key` (false: one is running).
    func beginRefresh(_ key: String) -> Bool {
        refreshing.withLock { $0.insert(key).inserted }
    }

    func endRefresh(_ key: String) {
        _ = refreshing.withLock { $0.remove(key) }
    }

    enum Role {
        case leader
        /// Queued: `wake` runs on the caller's loop with the shared fetch
        /// once published, or nil when the leader is done without one.
        case waiting
        /// The response is already streaming: follow it.
        case following(SharedFetch)
    }

    /// `wake` makes the waiter's closure; it runs only when queuing (most
    /// callers lead, and need none).
    func lead(_ key: String, loop: EventLoop, wake: @autoclosure () -> (SharedFetch?) -> Void) -> Role {
        var offer: Offer?
        // One hash lookup: the entry is inserted (new) or found, and changed in place.
        func join(_ entry: inout Entry) -> Role {
            if entry.isNew {
                entry.isNew = false
                return .leader
            }
            if let shared = entry.shared, shared.isJoinable { return .following(shared) }
            entry.waiters.append(Waiter(loop: loop, wake: wake()))
            // The first waiter takes up the leader's offer to share.
            offer = entry.offer
            entry.offer = nil
            return .waiting
        }
        let role = inFlight.withLock { table in join(&table[key, default: Entry(isNew: true)]) }
        if let offer { offer.loop.execute(offer.share) }
        return role
    }

    /// The leader's response is storable and streams: true when requests
    /// already wait (the leader publishes at once); otherwise `share` runs
    /// on `loop` when the first one comes (the leader then publishes, or
    /// does nothing if it can no longer share).
    func offer(_ key: String, loop: EventLoop, share: @escaping () -> Void) -> Bool {
        inFlight.withLock { table in
            guard let index = table.index(forKey: key) else { return false }
            if !table.values[index].waiters.isEmpty { return true }
            table.values[index].offer = Offer(loop: loop, share: share)
            return false
        }
    }

    /// The leader's response streams: hand it to every waiter.
    func publish(_ key: String, _ fetch: SharedFetch) {
        let waiters = inFlight.withLock { table -> [Waiter] in
            guard let index = table.index(forKey: key) else { return [] }
            table.values[index].shared = fetch
            table.values[index].offer = nil
            defer { table.values[index].waiters = [] }
            return table.values[index].waiters
        }
        for waiter in waiters { waiter.loop.execute { waiter.wake(fetch) } }
    }

    /// The leader is done: wakes every waiter still queued on its own loop.
    func release(_ key: String) {
        let waiters = inFlight.withLock { $0.removeValue(forKey: key) }?.waiters ?? []
        for waiter in waiters { waiter.loop.execute { waiter.wake(nil) } }
    }
}

/// One upstream response shared by the requests collapsed onto it, as it
/// arrives: the head, then body pieces kept (as immutable `Bytes`, queued
/// to every client without copying) until the fetch ends. Followers on any
/// worker are notified on their own loop, at most once per pending read.
final class SharedFetch: @unchecked Sendable, Equatable {
    static func == (lhs: SharedFetch, rhs: SharedFetch) -> Bool { lhs === rhs }

    struct Head {
        let status: Int
        let reason: String?
        /// The fields clients get (hop-by-hop and tag fields removed).
        let headers: HeaderFields
        let timing: ResponseTiming
        let contentLength: Int?
        /// The request fields that select this response (Vary), and the
        /// leader's normalized values for them: a follower must match.
        let varyNames: [String]
        let varyValues: [String?]
        /// A 206 answers the leader's Range (and If-Range) alone: only a
        /// request asking the same may follow it (nil for other statuses).
        var ranges: [String?]? = nil

        /// Whether `request` selects this response: its Vary fields match
        /// the leader's, it asks for the same range as the leader when the
        /// response is partial, and it takes the body's coding (else it
        /// fetches on its own).
        func suits(_ request: RequestHead) -> Bool {
            if let ranges, ranges != Head.ranges(of: request) { return false }
            for (name, value) in zip(varyNames, varyValues) where Vary.normalize(VariantValue.of(name, in: request.headers), field: name) != value {
                return false
            }
            // A gzip body streams as it comes: only to clients that take it.
            return AcceptEncoding(request.combinedHeader("accept-encoding")).takes(contentEncoding: headers["content-encoding"])
        }

        fileprivate static func ranges(of request: RequestHead) -> [String?] {
            [request.combinedHeader("range"), request.combinedHeader("if-range")]
        }
    }

    enum State { case streaming, complete, failed }

    /// The leader's response as shared (`varyNames`: the request fields it
    /// varies on, taken from the leader's request).
    static func head(of response: UpstreamResponse, varyNames: [String], leader request: RequestHead) -> Head {
        Head(status: response.status, reason: response.reason, headers: response.fields, timing: response.timing,
             contentLength: response.length, varyNames: varyNames,
             varyValues: varyNames.map { Vary.normalize(VariantValue.of($0, in: request.headers), field: $0) },
             ranges: response.status == 206 ? Head.ranges(of: request) : nil)
    }

    private struct Follower {
        let loop: EventLoop
        let notify: () -> Void
        var notified = false
    }

    private struct Body {
        var chunks: [Bytes] = []
        var bytes = 0
        var state = State.streaming
        var followers: [ObjectIdentifier: Follower] = [:]
    }

    let head: Head
    /// Bytes kept for followers at most; beyond, following fails (the
    /// followers' connections are closed, as on an upstream failure).
    let limitBytes: Int
    private let body = Locked(Body())

    init(head: Head, limitBytes: Int) {
        self.head = head
        self.limitBytes = limitBytes
    }

    /// Whether a newcomer can still receive the whole response.
    var isJoinable: Bool { body.withLock { $0.state != .failed } }

    var hasFollowers: Bool { body.withLock { !$0.followers.isEmpty } }

    // MARK: the leader

    func append(_ chunk: Bytes) {
        let toNotify = body.withLock { body -> [Follower] in
            guard body.state == .streaming else { return [] }
            if body.bytes + chunk.count > limitBytes {
                body.state = .failed
                body.chunks = []
            } else {
                body.chunks.append(chunk)
                body.bytes += chunk.count
            }
            return Self.due(&body)
        }
        for follower in toNotify { follower.loop.execute(follower.notify) }
    }

    func finish(_ outcome: State) {
        let toNotify = body.withLock { body -> [Follower] in
            guard body.state == .streaming else { return [] }
            body.state = outcome
            return Self.due(&body)
        }
        for follower in toNotify { follower.loop.execute(follower.notify) }
    }

    private static func due(_ body: inout Body) -> [Follower] {
        var due: [Follower] = []
        for (id, follower) in body.followers where !follower.notified {
            body.followers[id]!.notified = true
            due.append(follower)
        }
        return due
    }

    // MARK: followers

    func follow(_ id: ObjectIdentifier, loop: EventLoop, notify: @escaping () -> Void) {
        body.withLock { $0.followers[id] = Follower(loop: loop, notify: notify) }
    }

    func unfollow(_ id: ObjectIdentifier) {
        body.withLock { _ = $0.followers.removeValue(forKey: id) }
    }

    /// The pieces from `index` on and the state; re-arms the follower's
    /// notification.
    func read(_ id: ObjectIdentifier, from index: Int) -> (chunks: ArraySlice<Bytes>, state: State) {
        body.withLock { body in
            body.followers[id]?.notified = false
            let chunks = index < body.chunks.count ? body.chunks[index...] : []
            return (chunks, body.state)
        }
    }
}
