import CacheStorage
import EventLoop
import Telemetry
import Threads

/// Streams that wait: for the client's window, or for a body file's pages
/// read into the page cache off the loop (`StreamCarrier.load`).
extension HTTP2Connection {
    func waitsForWindow(_ stream: RequestStream) {
        if !windowWaiters.contains(Self.id(stream)) { windowWaiters.append(Self.id(stream)) }
    }

    func openStream(_ id: Int64) -> RequestStream? { closed ? nil : streams[Int32(truncatingIfNeeded: id)] }

    /// A stream that waited (for a window, a file's pages) sends again.
    func resume(_ stream: RequestStream) {
        session.resume(Self.id(stream))
        streamHasOutput(stream)
    }
}
