import CacheStorage
import EventLoop
import Logging
import Telemetry
import Transport

/// What a client connection (HTTP/1.1 or HTTP/2) and the answers it writes
/// use of the worker they run on, and nothing more: its loop, counters and
/// log, the exchanges' parts, the buffers a loop turn reuses, the date
/// line, whether it drains, and its `ConnectionOwner` (told when a
/// connection switches to HTTP/2 or closes). One per worker, used on its
/// thread only.
final class ConnectionServices {
    unowned(unsafe) let loop: EventLoop
    unowned(unsafe) let counters: WorkerStats
    let logger: Logger
    /// Who answers the connections' requests (the proxy's exchanges, or
    /// the admin API).
    let responder: Responder
    /// What exchanges are made with (HTTP/2 and stored answers are the
    /// proxy's alone).
    var exchangeParts: ExchangeParts {
        guard case .proxy(let parts) = responder else { preconditionFailure("only the proxy's connections make exchanges") }
        return parts
    }
    /// Set by the owner once it is made (it owns these services).
    unowned(unsafe) var owner: (any ConnectionOwner)?
    /// Read buffer shared by the worker's connections (one thread, one at a
    /// time; exclusivity checks off: see `ClientConnection.input`). Not
    /// zeroed: only what a read put there is read back (zeroing it was
    /// half of a worker's set-up, before the listener's first accept).
    @exclusivity(unchecked) var scratch = [UInt8](unsafeUninitializedCapacity: 64 * 1024) { _, count in count = 64 * 1024 }
    /// Where a hit's last head fields are assembled before being copied to
    /// the connection's queue (no array allocated per hit).
    @exclusivity(unchecked) var headScratch: [UInt8] = { var a: [UInt8] = []; a.reserveCapacity(256); return a }()
    /// Stored heads as response rules leave them (`EditedHeads`; a few
    /// hundred bytes a worker, made at once: made lazily, each read cost a retain).
    let editedHeads = EditedHeads()
    /// What a hit copies into a client's output (its per-request tail, a
    /// small body read from a file) is written here when no output still
    /// holds it from an earlier hit (most are written out at once).
    @exclusivity(unchecked) var outputBlock = Bytes(count: ConnectionServices.outputBlockBytes) { _ in true }!
    static let outputBlockBytes = (64 << 10) + 1024
    var dateHeader = DateHeader()
    /// The worker stops: answers end their connections.
    var draining = false

    init(loop: EventLoop, counters: WorkerStats, logger: Logger, responder: Responder) {
        self.loop = loop
        self.counters = counters
        self.logger = logger
        self.responder = responder
    }

    /// The stored-response rules in force (a reload replaces them).
    var builder: StoredResponseBuilder { exchangeParts.cache.builder }

    func switchToHTTP2(replacing connection: any ClientTransport, stream: ByteStream, input: [UInt8], peer: String,
                       settings: ConnectionSettings) {
        owner?.switchToHTTP2(replacing: connection, stream: stream, input: input, peer: peer, settings: settings)
    }

    func connectionClosed(_ connection: any ClientTransport) { owner?.connectionClosed(connection) }

    /// `connection` goes on as `next` (an upgraded connection's tunnel).
    func replace(_ connection: any ClientTransport, with next: any ClientTransport) { owner?.replace(connection, with: next) }
}

/// Where a connection reports what changes the worker's set of connections.
protocol ConnectionOwner: AnyObject {
    /// The connection speaks HTTP/2 from now on (ALPN h2, or the h2c
    /// preface): `stream` goes on with `input`, the bytes read and not parsed.
    func switchToHTTP2(replacing connection: any ClientTransport, stream: ByteStream, input: [UInt8], peer: String,
                       settings: ConnectionSettings)
    func connectionClosed(_ connection: any ClientTransport)
    /// The same connection, now handled by `next`.
    func replace(_ connection: any ClientTransport, with next: any ClientTransport)
}
