import EventLoop
import HTTP1

/// Request collapsing, the waiting side. A request whose cacheable fetch
/// is about to go upstream joins its key (`Collapser`): it leads the
/// fetch, follows a response already streaming, or waits for the leader,
/// bounded by a timer. A wait ends once: with the leader's response to
/// follow, with another variant than the request's (fetch alone), or
/// with nothing to share (look the key up again: the leader may have
/// stored it).
final class LeaderWait {
    enum Joined {
        /// This request's fetch is the one others wait for.
        case leading
        /// Leading here, the fleet's claim asked (`CacheLock.join`): its
        /// answer runs once, on this loop, unless stopped first.
        case claiming(LeaderWait)
        /// The leader's response streams and suits this request.
        case following(SharedFetch)
        /// Queued: `ended` runs once, on this loop, unless stopped first.
        case waiting(LeaderWait)
        /// Fetch without collapsing (not a GET, or another variant).
        case fetchAlone
    }

    enum Ended {
        case follow(SharedFetch)
        case fetchAlone
        case lookUpAgain
        /// The fleet's claim (`claiming`): true when this node holds it,
        /// false when another node fetched.
        case claimedAcrossFleet(Bool)

        var follows: Bool {
            if case .follow = self { return true }
            return false
        }
    }

    private let loop: EventLoop
    private let request: RequestHead
    private var ended: ((Ended) -> Void)?
    private var timer: TimerID = .none

    init(loop: EventLoop, request: RequestHead, ended: @escaping (Ended) -> Void) {
        self.loop = loop
        self.request = request
        self.ended = ended
    }

    /// `timeoutMilliseconds`: how long a leader is waited for (a slow one
    /// stops being waited for; the request then looks up and fetches).
    /// `asGet`: a HEAD that missed, fetched as a GET (`Forwarding.fetchesAsGet`).
    static func join(_ key: String, for request: RequestHead, asGet: Bool = false, collapser: Collapser, loop: EventLoop,
                     timeoutMilliseconds: UInt64, ended: @escaping (Ended) -> Void) -> Joined {
        // GETs (and HEADs fetched as GETs), and POSTs cached as queries (their key holds their body's digest).
        guard request.method == "GET" || request.method == "POST" || request.method == "QUERY" || asGet else { return .fetchAlone }
        let wait = LeaderWait(loop: loop, request: request, ended: ended)
        switch collapser.lead(key, loop: loop, wake: { [weak wait] (fetch: SharedFetch?) in wait?.end(fetch) }) {
        case .leader:
            return .leading
        case .following(let fetch):
            return fetch.head.suits(request) ? .following(fetch) : .fetchAlone
        case .waiting:
            wait.timer = loop.schedule(after: timeoutMilliseconds) { [weak wait] in wait?.end(nil) }
            return .waiting(wait)
        }
    }

    /// The leader published its response (`fetch`), finished without one
    /// to share, or the wait timed out (nil).
    private func end(_ fetch: SharedFetch?) {
        guard let ended else { return }
        stop()
        if let fetch {
            ended(fetch.head.suits(request) ? .follow(fetch) : .fetchAlone)
        } else {
            ended(.lookUpAgain)
        }
    }

    /// The fleet's claim of a `claiming` wait was answered: false when the
    /// wait was stopped (its claims are then the caller's to let go).
    func claimAnswered(_ claimed: Bool) -> Bool {
        guard let ended else { return false }
        stop()
        ended(.claimedAcrossFleet(claimed))
        return true
    }

    /// Still waiting: neither ended nor stopped.
    var isWaiting: Bool { ended != nil }

    /// No longer waiting (the client left): nothing more is told.
    func stop() {
        ended = nil
        loop.cancel(timer)
    }
}
