import EventLoop
import HTTP3
import Logging
import TLS
#if canImport(Glibc)
import Glibc
#endif

/// A socket a worker accepts client connections on: plain HTTP, or TLS
/// with its listener's current certificates.
public struct ProxyListener {
    public let fd: Int32
    public let tls: TLSContextSlot?
    /// Whether HTTP/2 is spoken: h2c by prior knowledge on a plain
    /// listener (a TLS listener offers h2 by ALPN when its context does).
    public let http2: Bool
    /// HTTP/3 beside a TLS listener: this worker's UDP socket on the same
    /// port and the listener's QUIC certificates; its TLS answers then say
    /// so (Alt-Svc).
    public let quic: (fd: Int32, credentials: QUICCredentialsSlot, port: UInt16)?

    public init(fd: Int32, tls: TLSContextSlot? = nil, http2: Bool = true,
                quic: (fd: Int32, credentials: QUICCredentialsSlot, port: UInt16)? = nil) {
        self.fd = fd
        self.tls = tls
        self.http2 = http2
        self.quic = quic
    }

    /// Alt-Svc's value on this listener's answers (RFC 7838; a day, as Caddy and nginx advertise).
    var altService: String? { quic.map { "h3=\":\($0.port)\"; ma=86400" } }
}

/// What an acceptor is given by its worker.
protocol AcceptorOwner: AnyObject {
    var loop: EventLoop { get }
    var logger: Logger { get }
    /// Out of descriptors: gives back files the store keeps open for its
    /// hits (it keeps fewer from then on); how many.
    func releaseDescriptors() -> Int
    /// Takes an accepted connection on.
    func admit(_ fd: Int32, peer: String, tls: TLSContext?, http2: Bool, altService: String?)
}

/// Accepts one listener's connections for its worker (each worker has its
/// own socket per listener, SO_REUSEPORT).
final class Acceptor: IOHandler {
    let listener: ProxyListener
    private unowned let worker: any AcceptorOwner
    private var closed = false

    init(_ listener: ProxyListener, worker: any AcceptorOwner) {
        self.listener = listener
        self.worker = worker
    }

    func start() throws(SystemError) { try worker.loop.watch(listener.fd, .read, self) }

    func ready(_ events: IOEvents) {
        guard !closed else { return }
        for _ in 0..<64 {
            let accepted: (fd: Int32, peer: String)?
            do {
                accepted = try Socket.accept(listener.fd)
            } catch {
                // Out of descriptors: files the disk tier keeps open for its
                // hits are given back first.
                if error.errno == EMFILE || error.errno == ENFILE, worker.releaseDescriptors() > 0 { continue }
                // EMFILE and friends: the listener stays readable, so pause
                // accepting briefly rather than spin (and log once per pause).
                worker.logger.warning("accept failed: \(error); pausing accepts for 100 ms")
                worker.loop.setInterest(listener.fd, [])
                worker.loop.schedule(after: 100) { [weak self] in
                    guard let self, !self.closed else { return }
                    self.worker.loop.setInterest(self.listener.fd, .read)
                }
                return
            }
            guard let accepted else { return }
            worker.admit(accepted.fd, peer: accepted.peer, tls: listener.tls?.context, http2: listener.http2,
                         altService: listener.altService)
        }
    }

    /// Stops accepting (draining): the socket is closed.
    func close() {
        guard !closed else { return }
        closed = true
        worker.loop.unwatch(listener.fd)
        Socket.close(listener.fd)
    }
}
