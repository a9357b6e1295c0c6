import CacheStorage
import EventLoop

/// One collapsed request reading the leader's shared response
/// (`SharedFetch`) as it arrives: a `BodySource` its sink pulls as the
/// client drains, pieces in order, then the end or the cut. The shared
/// response notifies it (`ready`) when pieces arrive while it waits. The
/// head is the exchange's to write.
final class SharedFetchReader: BodySource {
    private let fetch: SharedFetch
    /// Pieces handed over so far: the next read starts after them.
    private var read = 0
    private var stopped = false
    /// Pieces are references to the shared ones (never copied): a pull
    /// hands over up to this much before letting other events in.
    let pullBudget = 256 << 10

    /// `ready`: runs on `loop` when pieces (or the end) arrive.
    init(_ fetch: SharedFetch, loop: EventLoop, ready: @escaping () -> Void) {
        self.fetch = fetch
        fetch.follow(ObjectIdentifier(self), loop: loop, notify: ready)
    }

    func pull(into sink: any ResponseSink, budget: Int) -> BodyPull {
        guard !stopped else { return .waiting }
        let (chunks, state) = fetch.read(ObjectIdentifier(self), from: read)
        var given = 0
        for chunk in chunks {
            if given >= budget || (given > 0 && sink.isBodyCongested) { return .more }
            sink.sendBody(chunk)
            read += 1
            given += chunk.count
        }
        switch state {
        case .streaming:
            return .waiting
        case .complete:
            stop()
            return .ended
        case .failed:
            // It broke after the head was sent (upstream, or too large to keep).
            stop()
            return .cut("the response being shared broke off")
        }
    }

    func stop() {
        guard !stopped else { return }
        stopped = true
        fetch.unfollow(ObjectIdentifier(self))
    }
}
