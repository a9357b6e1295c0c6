import CHiredis
import EventLoop
import Synchronization
import TLS
#if canImport(Glibc)
import Glibc
#endif

/// One asynchronous connection to Redis on a Larder event loop: hiredis
/// encodes commands (`redisFormatCommandArgv`) and parses replies (its
/// reader); the socket is this loop's, plain or through TLS (`rediss://`),
/// and every wait is bounded by its timers. Nothing here blocks. Loop
/// thread only.
///
/// Commands may be sent as soon as it is made: they queue behind the
/// connection's own AUTH and SELECT. When the connection fails (cannot
/// connect, AUTH refused, a reply overdue, closed by the server) every
/// waiting command gets the `RedisError`, then `onClosed`; it never
/// reconnects itself (its owner decides when to try again).
public final class RedisConnection: IOHandler {
    public typealias Reply = (Result<RedisReply, RedisError>) -> Void

    let loop: EventLoop
    let address: RedisAddress
    var fd: Int32 = -1
    var interest: IOEvents = []
    var watched = false
    /// Connecting (the socket or the TLS handshake), then open.
    var open = false
    var tls: TLSSession?
    let tlsContext: TLSClientContext?
    /// Encoded commands not yet taken by the socket.
    var output: [UInt8] = []
    var outputSent = 0
    /// What each read lands in (one per connection, not one per read).
    var readBuffer = [UInt8](repeating: 0, count: 16 * 1024)
    let reader: UnsafeMutablePointer<redisReader>
    /// Replies come in the order commands went: their callers, in order.
    private var waiting: [(token: UInt64, waiter: Waiting)] = []
    private var waitingStart = 0
    /// Once subscribed, every reply after those waiting is a message.
    private var subscription: ((RedisReply) -> Void)?
    private var nextToken: UInt64 = 1
    private var connectTimer: TimerID = .none
    private(set) var failure: RedisError?
    private let commandTimeoutMilliseconds: UInt64
    /// Runs once, when the connection is gone (after every waiting command
    /// got its error).
    public var onClosed: ((RedisError) -> Void)?
    /// Runs once, when connected (and AUTH and SELECT were accepted).
    public var onReady: (() -> Void)?
    public private(set) var isReady = false

    private struct Waiting {
        let reply: Reply
        let timer: TimerID
    }

    /// `password`: sent with AUTH first; `commandTimeoutMilliseconds`: how
    /// long a reply may take (a blocking command gives its own);
    /// `requireMaster`: ready only once `ROLE` says it is a master (one
    /// Sentinel named may have become a replica since); `tls`: how a
    /// `rediss://` server's certificate is verified (the system's
    /// authorities when nil).
    public init(_ address: RedisAddress, password: String?, loop: EventLoop, connectTimeoutMilliseconds: UInt64,
                commandTimeoutMilliseconds: UInt64, requireMaster: Bool = false, tls: TLSClientContext? = nil) {
        self.loop = loop
        self.address = address
        self.commandTimeoutMilliseconds = commandTimeoutMilliseconds
        tlsContext = tls
        reader = redisReaderCreate()
        // Connecting asks no name server: owners resolve first (`needsLookup`).
        if address.needsLookup { EventLoop.assertOffLoop("a Redis host name lookup (\(address))") }
        do {
            try connectSocket()
        } catch {
            failLater(RedisError("cannot connect to \(address): \(error.message)"))
            return
        }
        connectTimer = loop.schedule(after: connectTimeoutMilliseconds) { [weak self] in
            guard let self, !self.isReady else { return }
            self.close(RedisError("cannot connect to \(address): no answer within \(connectTimeoutMilliseconds) ms"))
        }
        if let password { handshake(["AUTH", password], what: "AUTH") }
        if address.database != 0 { handshake(["SELECT", String(address.database)], what: "SELECT \(address.database)") }
        if requireMaster {
            send(["ROLE"]) { [weak self] result in
                // (A ROLE an ACL refuses says nothing: the writes will tell.)
                guard case .success(let reply) = result, let role = reply.elements.first?.text, role != "master" else { return }
                self?.close(RedisError("Redis at \(address) is a \(role), not the master", notMaster: true))
            }
        }
        send(["PING"]) { [weak self] result in
            guard let self, self.failure == nil, case .success(let reply) = result else { return }
            if case .error(let message) = reply { return self.close(RedisError("Redis refused the connection: \(message)")) }
            self.loop.cancel(self.connectTimer)
            self.isReady = true
            self.onReady?()
        }
    }

    private func handshake(_ command: [String], what: String) {
        send(command) { [weak self] result in
            if case .success(.error(let message)) = result { self?.close(RedisError("Redis refused \(what): \(message)")) }
        }
    }

    /// What the daemon installs to give descriptors back when the process
    /// has none left (the disk tier's kept files); returns how many.
    private static let descriptorRelief = Mutex<(@Sendable () -> Int)?>(nil)

    public static func installDescriptorRelief(_ relief: @escaping @Sendable () -> Int) {
        descriptorRelief.withLock { $0 = relief }
    }

    static func relieveDescriptors() -> Int { descriptorRelief.withLock { $0 }?() ?? 0 }

    // MARK: commands

    /// Sends one command (arguments as given, binary-safe); `reply` runs
    /// once on this loop: with Redis's reply, or the connection's failure.
    public func send(_ arguments: [String], timeoutMilliseconds: UInt64? = nil, reply: @escaping Reply) {
        send(arguments.map { Array($0.utf8) }, timeoutMilliseconds: timeoutMilliseconds, reply: reply)
    }

    public func send(_ arguments: [[UInt8]], timeoutMilliseconds: UInt64? = nil, reply: @escaping Reply) {
        guard failure == nil, let encoded = Self.encode(arguments) else {
            let error = failure ?? RedisError("cannot encode a command of \(arguments.count) arguments")
            loop.execute { reply(.failure(error)) }
            return
        }
        let token = nextToken
        nextToken &+= 1
        let timeout = timeoutMilliseconds ?? commandTimeoutMilliseconds
        let timer = loop.schedule(after: timeout) { [weak self] in
            guard let self, self.waiting[self.waitingStart...].contains(where: { $0.token == token }) else { return }
            self.close(RedisError("Redis did not answer within \(timeout) ms"))
        }
        waiting.append((token, Waiting(reply: reply, timer: timer)))
        output += encoded
        if open { flush() }
    }

    /// Subscribes to `channel` (the connection is then for subscriptions
    /// only): `subscribed` runs once Redis confirmed it, `message` with each
    /// message's payload. A failure of the connection ends it (`onClosed`).
    public func subscribe(_ channel: String, subscribed: @escaping () -> Void, message: @escaping ([UInt8]) -> Void) {
        guard failure == nil, let encoded = Self.encode([Array("SUBSCRIBE".utf8), Array(channel.utf8)]) else { return }
        subscription = { reply in
            // ["message", channel, payload]; the first reply confirms the subscription.
            let parts = reply.elements
            guard parts.count == 3 else { return }
            if parts[0].text == "message", case .string(let payload) = parts[2] { message(payload) }
            if parts[0].text == "subscribe" { subscribed() }
        }
        output += encoded
        if open { flush() }
    }

    /// hiredis's encoding of one command (RESP: an array of bulk strings).
    private static func encode(_ arguments: [[UInt8]]) -> [UInt8]? {
        let buffers = arguments.map { bytes -> UnsafeMutablePointer<CChar> in
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(bytes.count, 1))
            bytes.withUnsafeBytes { raw in
                if let base = raw.baseAddress { UnsafeMutableRawPointer(copy).copyMemory(from: base, byteCount: raw.count) }
            }
            return copy
        }
        defer { buffers.forEach { $0.deallocate() } }
        var argv = buffers.map { UnsafePointer<CChar>?(UnsafePointer($0)) }
        let lengths = arguments.map(\.count)
        var target: UnsafeMutablePointer<CChar>?
        let count = argv.withUnsafeMutableBufferPointer { argvBuffer in
            lengths.withUnsafeBufferPointer { redisFormatCommandArgv(&target, Int32(arguments.count), argvBuffer.baseAddress!, $0.baseAddress!) }
        }
        guard count > 0, let target else { return nil }
        defer { redisFreeCommand(target) }
        return Array(UnsafeRawBufferPointer(start: target, count: Int(count)))
    }

    /// Replies parsed from what was read, each to its waiting command (or,
    /// subscribed, to the subscription); a reply that is not Redis's
    /// protocol ends the connection.
    func deliverReplies() {
        while failure == nil {
            var parsed: UnsafeMutableRawPointer?
            guard redisReaderGetReply(reader, &parsed) == REDIS_OK else {
                let why = withUnsafeBytes(of: reader.pointee.errstr) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                return close(RedisError("the connection to Redis closed: \(why)"))
            }
            guard let parsed else { return }
            let reply = RedisReply(parsed.assumingMemoryBound(to: redisReply.self))
            freeReplyObject(parsed)
            if waitingStart < waiting.count {
                let (_, waiter) = waiting[waitingStart]
                waitingStart += 1
                if waitingStart > 64 && waitingStart * 2 > waiting.count {
                    waiting.removeFirst(waitingStart)
                    waitingStart = 0
                }
                loop.cancel(waiter.timer)
                waiter.reply(.success(reply))
            } else {
                subscription?(reply)
            }
        }
    }

    // MARK: closing

    /// Closes it now: every waiting command gets `error`, then `onClosed` runs.
    public func close(_ error: RedisError = RedisError("closed")) {
        guard failure == nil else { return }
        failAll(error)
    }

    func failAll(_ error: RedisError) {
        if failure == nil { failure = error }
        isReady = false
        loop.cancel(connectTimer)
        closeSocket()
        let left = waiting[waitingStart...]
        waiting = []
        waitingStart = 0
        subscription = nil
        for (_, waiter) in left {  // in the order sent
            loop.cancel(waiter.timer)
            waiter.reply(.failure(error))
        }
        if let onClosed {
            self.onClosed = nil
            onClosed(error)
        }
    }

    /// From the initializer: the owner hears of it on a later loop turn.
    private func failLater(_ error: RedisError) {
        failure = error
        loop.execute { [weak self] in
            guard let self else { return }
            self.failure = nil
            self.failAll(error)
        }
    }

    deinit {
        if fd >= 0 { Socket.close(fd) }
        redisReaderFree(reader)
    }
}
