import Admin
import Bytes
import EdgeControls
import HTTP1
import Logging
import Telemetry

/// One admin request on the proxy's HTTP/1.1 transport: the admin API's
/// answer, written whole; or later (a purge waiting for the fleet: the
/// connection's next requests wait their turn, as pipelined ones do); or,
/// for a log follower, a chunked stream that ends with its connection.
/// Admin request bodies are not read. An unauthorized answer closes the
/// connection (an unauthenticated client holds no descriptor).
final class AdminExchange: ConnectionRequest, LogFollower {
    private let head: RequestHead
    private let api: AdminAPI
    private let following: LogFollowing
    private let logger: Logger
    /// Unsafe, and safe: the connection owns its request and cancels it
    /// when it closes.
    private unowned(unsafe) let connection: ClientConnection
    /// Following the log: what its client asked for, and the lines it lost
    /// (its client read too slowly) since it was last told.
    private var filter: LogFilter?
    private var dropped = 0
    private lazy var lines = ByteBuffer(capacity: 64)  // (a follower's only)
    private(set) var responseStarted = false
    private var over = false
    private var refusedAddress = false

    /// `admin_allow`: the addresses answered (nil: all).
    private let allow: AddressList?

    init(_ head: RequestHead, api: AdminAPI, following: LogFollowing, logger: Logger, connection: ClientConnection,
         allow: AddressList? = nil) {
        self.head = head
        self.allow = allow
        self.logger = logger
        self.api = api
        self.following = following
        self.connection = connection
    }

    func start() {
        if let allow, !allow.contains(connection.peerAddress) {
            // Closed after it, as an unauthorized answer is: a refused address holds no descriptor.
            refusedAddress = true
            return finish(.error(403, "forbidden: \(connection.peerAddress) is not in admin_allow"))
        }
        let response = api.answer(head, peer: connection.peer)
        if let filter = response.follow {
            if let refusal = following.refusal() { return finish(refusal) }
            self.filter = filter
            responseStarted = true
            connection.enqueue(LogFollowing.streamHead)
            connection.flush()
            following.start(self)
            return
        }
        guard let later = response.later else { return finish(response) }
        let loop = connection.loop
        later { [weak self] final in
            loop.execute { self?.finish(final) }
        }
    }

    private func finish(_ response: AdminAPI.Response) {
        guard !over else { return }
        over = true
        let close = !head.keepAlive || refusedAddress || response.status == 401 || response.status == 411 || response.status == 503
        connection.enqueue(response.serialized(close: close, head: head.method == "HEAD"))
        connection.exchangeFinished(keepAlive: !close)
    }

    func deliver(_ batch: LogBatch, droppedByWorkers: Int, format: inout AccessLineFormatter) {
        guard let filter, !over else { return }
        dropped += droppedByWorkers
        guard let bytes = LogFollowing.lines(batch, filter: filter, dropped: &dropped, behind: connection.isCongested,
                                             format: &format, into: lines) else { return }
        connection.enqueue(LogFollowing.chunk(Array(bytes)))
        connection.flush()
    }

    func requestBody(_ bytes: UnsafeRawBufferPointer) {}  // (not read: admin requests are their method and target)
    func requestBodyEnd() {}
    var isUploadCongested: Bool { false }
    func outputDrained() {}

    func sendTimedOut(after milliseconds: UInt64) {
        guard filter != nil else { return }
        logger.warning("dropping a log follower that has read nothing for \(milliseconds / 1000) s (send_timeout)")
    }

    func cancel() {
        over = true
        if filter != nil { following.stop(self) }
    }
}
