import EventLoop

/// One collapsed request reading the leader's shared response
/// (`SharedFetch`) as it arrives, and handing it to its client as an
/// upstream fetch hands over its own (`FetchClient`: body pieces, then the
/// end or the cut). The head is the client's to write.
final class SharedFetchReader {
    private let fetch: SharedFetch
    private unowned let client: any FetchClient
    /// Pieces handed over so far: the next read starts after them.
    private var read = 0
    private var stopped = false

    init(_ fetch: SharedFetch, for client: any FetchClient, loop: EventLoop) {
        self.fetch = fetch
        self.client = client
        fetch.follow(ObjectIdentifier(self), loop: loop) { [weak self] in self?.pull() }
    }

    /// Hands over what arrived since the last pull; ends with the fetch.
    func pull() {
        guard !stopped else { return }
        let (chunks, state) = fetch.read(ObjectIdentifier(self), from: read)
        read += chunks.count
        for chunk in chunks { client.deliver(chunk) }
        switch state {
        case .streaming:
            return
        case .complete:
            stop()
            client.responseEnded(whole: true)
        case .failed:
            // It broke after the head was sent (upstream, or too large to keep).
            stop()
            client.responseCut()
        }
    }

    /// The client left or is done: nothing more is handed over.
    func stop() {
        guard !stopped else { return }
        stopped = true
        fetch.unfollow(ObjectIdentifier(self))
    }
}
