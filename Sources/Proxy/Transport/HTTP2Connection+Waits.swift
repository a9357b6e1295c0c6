import CacheStorage
import EventLoop
import Telemetry
import Threads

/// Streams that wait: for the client's window, or for a body file's pages
/// read into the page cache off the loop.
extension HTTP2Connection {
    func waitsForWindow(_ stream: RequestStream) {
        if !windowWaiters.contains(Self.id(stream)) { windowWaiters.append(Self.id(stream)) }
    }

    /// A body file's next bytes are read into the page cache off the loop.
    func load(_ file: OpenFile, offset: Int, count: Int, for stream: RequestStream) {
        WorkerStats.bump(services.counters.offloadedReads)
        let id = Self.id(stream)
        BlockingWork.shared.run({ FilePages.load(file.fd, offset: offset, count: count) }, on: loop) { [weak self] _ in
            file.cachedUntil = max(file.cachedUntil, offset + count)
            guard let self, !self.closed, let stream = self.streams[id] else { return }
            self.resume(stream)
        }
    }

    /// A stream that waited (for a window, a file's pages) sends again.
    func resume(_ stream: RequestStream) {
        session.resume(Self.id(stream))
        streamHasOutput(stream)
    }
}
