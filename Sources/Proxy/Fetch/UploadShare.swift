import EventLoop
import HTTPHeaders
import Upstream

/// The upstream connections that uploads still coming from their clients
/// may hold at once, on one worker: a client that never finishes its body
/// holds its connection for as long as it likes, and a thousand of them
/// took every connection while misses waited for one. Beyond the share an
/// upload waits its turn, its client unread; the rest is for the others.
final class UploadShare {
    /// Half of the connections a worker has to a server, at least one.
    static func limit(connections: Int) -> Int { max(1, connections / 2) }

    private(set) var inFlight = 0
    /// Called in turn as places free: each takes the place (true), or is
    /// gone (false) and the next is asked.
    private var waiting: [() -> Bool] = []
    private var head = 0

    var waitingCount: Int { waiting.count - head }

    /// A place now (true), or `resume` is called once one frees (false).
    func take(limit: Int, resume: @escaping () -> Bool) -> Bool {
        guard inFlight >= limit || waitingCount > 0 else {
            inFlight += 1
            return true
        }
        waiting.append(resume)
        return false
    }

    /// A place is free: the next waiting upload gets it, on the loop's next
    /// turn (never from inside the call that freed it).
    func release(limit: Int, on loop: EventLoop) {
        inFlight -= 1
        guard waitingCount > 0 else { return }
        loop.execute { [weak self] in self?.wake(limit: limit) }
    }

    func wake(limit: Int) {
        while inFlight < limit && waitingCount > 0 {
            let next = waiting[head]
            head += 1
            inFlight += 1
            if !next() { inFlight -= 1 }
        }
        if head > 64 && head * 2 > waiting.count {
            waiting.removeFirst(head)
            head = 0
        }
    }
}

/// One fetch's streaming upload and its place in the `UploadShare`: none
/// yet, waiting for one (the request, and the body bytes that came
/// meanwhile, kept), or placed.
struct UploadTurn {
    struct Waited {
        var fields: HeaderFields
        var body: UpstreamRequest.Body
        var bytes: [UInt8] = []
        var ended = false
    }

    private(set) var hasPlace = false
    private var waited: Waited?

    var isWaiting: Bool { waited != nil }

    mutating func placed() { hasPlace = true }
    mutating func wait(_ fields: HeaderFields, _ body: UpstreamRequest.Body) { waited = Waited(fields: fields, body: body) }
    mutating func hold(_ bytes: UnsafeRawBufferPointer) { waited?.bytes += bytes }
    mutating func end() { waited?.ended = true }

    /// The place came: what waited, placed now.
    mutating func resume() -> Waited? {
        defer { waited = nil }
        guard let waited else { return nil }
        hasPlace = true
        return waited
    }

    /// Lets the place go (and anything waiting): true when it had one.
    mutating func leave() -> Bool {
        waited = nil
        defer { hasPlace = false }
        return hasPlace
    }
}
