import Bytes
import EventLoop
import Telemetry
import Transport
import HTTP1
import HTTPHeaders
#if canImport(Glibc)
import Glibc
#endif

/// The admin listener: HTTP/1.1 on its own thread and event loop, so a slow
/// purge (deleting many files) never stalls a proxy worker. Requests are
/// small and answered one at a time per connection.
public final class AdminServer: IOHandler {
    public let loop: EventLoop
    private let listener: Int32
    private let api: AdminAPI
    private var connections: [ObjectIdentifier: AdminConnection] = [:]
    let onError: (String) -> Void
    /// The requests as they happen (`GET /log?follow=1`); nil: not offered.
    let feed: LogFeed?
    /// Connections following the log, fed every `followInterval` ms.
    var followers: [ObjectIdentifier: AdminConnection] = [:]
    var followTimer = TimerID.none
    /// Formats the followers' lines (keeps its time stamp between pumps).
    var lineFormat = AccessLineFormatter()

    /// How long an idle admin connection stays open once it has sent an
    /// authorized request; before that (an unauthenticated client holding a
    /// descriptor) only `firstRequestTimeoutMilliseconds`.
    static let idleTimeoutMilliseconds: UInt64 = 30_000
    static let firstRequestTimeoutMilliseconds: UInt64 = 5_000
    /// Open admin connections at most (admin_max_connections); beyond it a
    /// new one gets 503 and is closed, so idle admin clients cannot use up
    /// the descriptors the proxy needs.
    private let maxConnections: Int
    private var lastRefusalLog: UInt64 = 0
    /// What its connections read into (they run on its one loop).
    var scratch = [UInt8](repeating: 0, count: 16 * 1024)
    /// Admin requests carry no meaningful body; this bounds what is read.
    static let maxBodyBytes = 64 * 1024

    /// Log followers at most: a quarter of the connections (8 at most), so
    /// followers never take the room purges and health checks need.
    let maxFollowers: Int
    /// A follower whose output has not moved for this long is dropped
    /// (send_timeout): it does not read.
    let followerSendTimeoutMilliseconds: UInt64

    /// Cross-site and rebinding requests refused (`AdminRequestGuard`).
    let requestGuard: AdminRequestGuard

    public init(listener: Int32, api: AdminAPI, maxConnections: Int = 64, feed: LogFeed? = nil,
                followerSendTimeoutMilliseconds: UInt64 = 60_000, requestGuard: AdminRequestGuard = AdminRequestGuard(),
                onError: @escaping (String) -> Void) throws(SystemError) {
        self.requestGuard = requestGuard
        loop = try EventLoop()
        self.feed = feed
        self.maxConnections = maxConnections
        maxFollowers = max(1, min(8, maxConnections / 4))
        self.followerSendTimeoutMilliseconds = followerSendTimeoutMilliseconds
        self.listener = listener
        self.api = api
        self.onError = onError
    }

    /// Serves on the calling thread until `stop`.
    public func run() {
        do {
            try loop.watch(listener, .read, self)
        } catch {
            onError("cannot watch the admin listener: \(error)")
            return
        }
        tick()
        loop.run()
    }

    public func stop() { loop.execute { [self] in loop.stop() } }

    /// The status page's history and top URLs advance once a second.
    private func tick() {
        api.tick()
        loop.schedule(after: 1000) { [weak self] in self?.tick() }
    }

    public func ready(_ events: IOEvents) {
        for _ in 0..<64 {
            let accepted: (fd: Int32, peer: String)?
            do {
                accepted = try Socket.accept(listener)
            } catch {
                // Out of descriptors: kept disk files go first, as for the proxy's accepts.
                if error.errno == EMFILE || error.errno == ENFILE, api.releaseDescriptors() > 0 { continue }
                onError("admin accept failed: \(error); pausing admin accepts for 100 ms")
                loop.setInterest(listener, [])
                loop.schedule(after: 100) { [weak self] in
                    guard let self else { return }
                    self.loop.setInterest(self.listener, .read)
                }
                return
            }
            guard let accepted else { return }
            if connections.count >= maxConnections {
                refuse(accepted.fd)
                continue
            }
            let connection = AdminConnection(fd: accepted.fd, server: self)
            connections[ObjectIdentifier(connection)] = connection
            connection.start()
        }
    }

    private func refuse(_ fd: Int32) {
        api.stats.adminRefusedConnections.wrappingAdd(1, ordering: .relaxed)
        Socket.refuse(fd, with: Self.busy)
        let now = EventLoop.nowMilliseconds()
        if now - lastRefusalLog > 10_000 {
            lastRefusalLog = now
            onError("admin_max_connections (\(maxConnections)) reached: refusing new admin connections with 503")
        }
    }

    private static let busy = ResponseSerializer.simple(status: 503, body: "too many admin connections; retry", close: true,
                                                        extra: ["retry-after": "1"])

    fileprivate func answer(_ head: RequestHead) -> AdminAPI.Response {
        if let refusal = requestGuard.refusal(method: head.method, host: head.header("host"), origin: head.header("origin"),
                                              fetchSite: head.header("sec-fetch-site"), contentType: head.header("content-type"),
                                              tokenRequired: api.token != nil) {
            return AdminAPI.Response.error(403, refusal)
        }
        return api.handle(method: head.method, target: head.target, authorization: head.header("authorization"),
                          cookie: head.header("cookie"))
    }

    fileprivate func closed(_ connection: AdminConnection) {
        connections[ObjectIdentifier(connection)] = nil
    }
}

/// One admin client connection: read a request (and skip its body), answer,
/// repeat while keep-alive. Its deadlines are `ConnectionDeadlines` on one
/// timer, as the proxy's connections' are: idle (short until a request was
/// authorized), and, for a log follower, its client taking output.
final class AdminConnection: IOHandler, DeadlineKeeper {
    private let fd: Int32
    /// Its bytes (the admin listener is plain).
    private let stream: ByteStream
    unowned let server: AdminServer
    private var input: [UInt8] = []
    /// Bytes to write; those before `outputStart` are written already
    /// (dropped once all are, or once they are most of it: a partial write
    /// does not move the rest).
    var output: [UInt8] = []
    private var outputStart = 0
    /// Bytes queued, not yet written.
    var backlog: Int { output.count - outputStart }
    /// Set while it streams the log: what its follower asked for, and the
    /// lines it could not take (its client reads too slowly), reported.
    var following: LogFilter?
    var droppedHere = 0
    /// A pump's lines for it.
    let lines = ByteBuffer(capacity: 64)
    private var parser = RequestParser(limits: ParseLimits(maxBodyBytes: AdminServer.maxBodyBytes))
    /// Body bytes of the current request still to skip.
    private var skipping = 0
    private var closeAfterWrite = false
    var deadlines = ConnectionDeadlines()
    var timer = TimerID.none
    var timerAt: UInt64 = 0
    var loop: EventLoop { server.loop }
    var closed: Bool { isClosed }
    private var isClosed = false
    /// Whether a request on it was authorized; until then it is closed
    /// after a short idle time.
    private var authorized = false
    /// An answer that comes later (a purge waiting for the fleet): later
    /// requests on the connection wait their turn.
    private var awaiting = false

    init(fd: Int32, server: AdminServer) {
        self.fd = fd
        stream = ByteStream(fd: fd)
        self.server = server
    }

    func start() {
        do {
            try server.loop.watch(fd, .read, self)
        } catch {
            close()
            return
        }
        armIdleTimer()
    }

    func ready(_ events: IOEvents) {
        if events.contains(.write) || backlog > 0 { flush() }
        if isClosed { return }
        if events.contains(.read) || events.contains(.hangup) || events.contains(.error) { readAvailable() }
    }

    private func readAvailable() {
        guard !isClosed && !closeAfterWrite else { return }
        var received = 0
        let reads = stream.readAvailable(into: &server.scratch, rounds: 64, received: &received,
                                         readMore: { !isClosed && !closeAfterWrite }) { bytes in
            input.append(contentsOf: bytes)
            if input.count > 2 * AdminServer.maxBodyBytes + 64 * 1024 {
                respond(AdminAPI.Response.error(413, "admin request too large"), close: true)
            } else {
                processInput()
            }
        }
        if reads != .waiting && !isClosed { close() }
    }

    private func processInput() {
        // A follower's connection is a stream out: what its client sends
        // more is not answered (an answer would cut into the stream).
        if following != nil {
            input.removeAll()
            return
        }
        while !isClosed && !closeAfterWrite && !awaiting {
            if skipping > 0 {
                let n = min(skipping, input.count)
                input.removeFirst(n)
                skipping -= n
                if skipping > 0 { return }
            }
            let result = input.withUnsafeBytes { parser.parse($0) }
            switch result {
            case .incomplete:
                return
            case .invalid(let error):
                respond(AdminAPI.Response.error(error.status, error.message), close: true)
                return
            case .complete(let head, let consumed):
                input.removeFirst(consumed)
                parser.reset()
                switch head.framing {
                case .none: break
                case .contentLength(let n): skipping = n
                case .chunked:
                    respond(AdminAPI.Response.error(411, "admin requests take no body; send Content-Length or none"), close: true)
                    return
                }
                let response = server.answer(head)
                if response.status != 401 { authorized = true }
                if let filter = response.follow {
                    guard server.feed != nil else {
                        respond(AdminAPI.Response.error(503, "this larder does not offer its log"), close: true)
                        return
                    }
                    guard server.followers.count < server.maxFollowers else {
                        respond(AdminAPI.Response.error(503, "too many log followers (\(server.maxFollowers)); retry later"), close: true)
                        return
                    }
                    deadlines[.idle] = nil  // a stream out: timed by its client's reading (.send)
                    startFollowing(filter)
                    return
                }
                armIdleTimer()
                if let later = response.later {
                    answerLater(later, close: !head.keepAlive, head: head.method == "HEAD")
                    return
                }
                respond(response, close: !head.keepAlive, head: head.method == "HEAD")
            }
        }
    }

    /// Waits for the final answer (its wait is bounded by whoever gives it),
    /// then answers and goes on with the requests behind it.
    private func answerLater(_ later: (@escaping (AdminAPI.Response) -> Void) -> Void, close: Bool, head: Bool) {
        awaiting = true
        let loop = server.loop
        later { [weak self] final in
            loop.execute {
                guard let self, !self.isClosed else { return }
                self.awaiting = false
                self.armIdleTimer()
                self.respond(final, close: close, head: head)
                self.processInput()
            }
        }
    }

    private func respond(_ response: AdminAPI.Response, close: Bool, head: Bool = false) {
        var out: [UInt8] = []
        ResponseSerializer.appendStatusLine(response.status, reason: nil, to: &out)
        ResponseSerializer.appendField("content-type", response.contentType, to: &out)
        ResponseSerializer.appendField("content-length", String(response.body.utf8.count), to: &out)
        ResponseSerializer.appendField("cache-control", "no-store", to: &out)
        for field in response.extraHeaders { ResponseSerializer.appendField(field.name, field.value, to: &out) }
        if close { ResponseSerializer.appendField("connection", "close", to: &out) }
        out.append(contentsOf: [0x0D, 0x0A])
        if !head { out.append(contentsOf: response.body.utf8) }
        output.append(contentsOf: out)
        if close { closeAfterWrite = true }
        flush()
    }

    /// Writes `pieces` straight from where they lie when nothing waits
    /// before them (a log follower that keeps up: no copy), and queues
    /// what the socket did not take.
    func send(_ pieces: [UnsafeRawBufferPointer]) {
        var written = 0
        if backlog == 0 {
            var iov = pieces.map { iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count) }
            do {
                written = try iov.withUnsafeMutableBufferPointer { (iov) throws(SystemError) -> Int? in
                    try stream.write(gathering: iov)
                } ?? 0
            } catch {
                close()
                return
            }
        }
        for piece in pieces {
            if written >= piece.count {
                written -= piece.count
                continue
            }
            output.append(contentsOf: UnsafeRawBufferPointer(rebasing: piece[written...]))
            written = 0
        }
        flush()
    }

    func flush() {
        while backlog > 0 {
            let written: Int?
            do {
                written = try output.withUnsafeBytes { raw -> Int? in
                    try stream.write(UnsafeRawBufferPointer(rebasing: raw[outputStart...]))
                }
            } catch {
                close()
                return
            }
            guard let written else {
                // A follower whose client reads nothing for send_timeout is dropped.
                if following != nil && deadlines[.send] == nil { setDeadline(.send, after: server.followerSendTimeoutMilliseconds) }
                if outputStart > output.count / 2 {
                    output.removeFirst(outputStart)
                    outputStart = 0
                }
                server.loop.setInterest(fd, closeAfterWrite ? .write : [.read, .write])
                return
            }
            outputStart += written
            if deadlines[.send] != nil { deadlines[.send] = nil }
        }
        if deadlines[.send] != nil { deadlines[.send] = nil }
        output.removeAll(keepingCapacity: output.capacity <= 1 << 20)
        outputStart = 0
        if closeAfterWrite {
            close()
        } else {
            server.loop.setInterest(fd, .read)
        }
    }

    private func armIdleTimer() {
        setDeadline(.idle, after: authorized ? AdminServer.idleTimeoutMilliseconds : AdminServer.firstRequestTimeoutMilliseconds)
    }

    func passed(_ deadline: ConnectionDeadlines.Kind) {
        if deadline == .send {
            server.onError("dropping a log follower that has read nothing for \(server.followerSendTimeoutMilliseconds / 1000) s (send_timeout)")
        }
        close()
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        if following != nil { server.stopFollowing(self) }
        cancelTimer()
        server.loop.unwatch(fd)
        stream.close(notify: false)
        server.closed(self)
    }
}
