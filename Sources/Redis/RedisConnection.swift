import CHiredis
import EventLoop
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One asynchronous connection to Redis on a Larder event loop: hiredis
/// encodes commands and parses replies; this loop watches its socket (the
/// `ev` hooks hiredis calls when it wants to read or write) and bounds
/// every wait with its timers. Nothing here blocks. Loop thread only.
///
/// Commands may be sent as soon as it is made: hiredis queues them behind
/// the connection's own AUTH and SELECT. When the connection fails (cannot
/// connect, AUTH refused, a reply overdue, closed by the server) every
/// waiting command gets the `RedisError`, then `onClosed`; it never
/// reconnects itself (its owner decides when to try again).
public final class RedisConnection: IOHandler {
    public typealias Reply = (Result<RedisReply, RedisError>) -> Void

    private let loop: EventLoop
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    private var fd: Int32 = -1
    private var interest: IOEvents = []
    private var watched = false
    private var waiting: [UInt64: Waiting] = [:]
    /// Subscriptions: their handlers hear every message, not one reply.
    private var subscriptions: [UInt64: (RedisReply) -> Void] = [:]
    private var nextToken: UInt64 = 1
    private var connectTimer: TimerID = .none
    private var failure: RedisError?
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
    /// Sentinel named may have become a replica since).
    public init(_ address: RedisAddress, password: String?, loop: EventLoop, connectTimeoutMilliseconds: UInt64,
                commandTimeoutMilliseconds: UInt64, requireMaster: Bool = false) {
        self.loop = loop
        self.commandTimeoutMilliseconds = commandTimeoutMilliseconds
        // hiredis would ask the name server here, on the loop: owners resolve first (`needsLookup`).
        if address.needsLookup { EventLoop.assertOffLoop("a Redis host name lookup (\(address))") }
        func connect() -> UnsafeMutablePointer<redisAsyncContext>? {
            switch address.endpoint {
            case .tcp(let host, let port): return redisAsyncConnect(host, Int32(port))
            case .unix(let path): return redisAsyncConnectUnix(path)
            }
        }
        var made = connect()
        // Out of descriptors: the disk tier's kept files are given back
        // (`descriptorRelief`) and the socket tried once more, as libcurl's are.
        if let failed = made, failed.pointee.err != 0, Self.isOutOfDescriptors(Self.errorText(failed)),
           Self.relieveDescriptors() > 0 {
            redisAsyncFree(failed)
            made = connect()
        }
        guard let made else {
            failLater(RedisError("cannot connect to \(address): out of memory"))
            return
        }
        if made.pointee.err != 0 {
            let message = Self.errorText(made)
            redisAsyncFree(made)
            failLater(RedisError("cannot connect to \(address): \(message)"))
            return
        }
        context = made
        fd = made.pointee.c.fd
        let me = Unmanaged.passUnretained(self).toOpaque()
        made.pointee.data = me
        made.pointee.ev.data = me
        made.pointee.ev.addRead = { RedisConnection.from($0).want(.read, true) }
        made.pointee.ev.delRead = { RedisConnection.from($0).want(.read, false) }
        made.pointee.ev.addWrite = { RedisConnection.from($0).want(.write, true) }
        made.pointee.ev.delWrite = { RedisConnection.from($0).want(.write, false) }
        made.pointee.ev.cleanup = { RedisConnection.from($0).cleanup() }
        _ = redisAsyncSetConnectCallback(made) { ac, status in
            guard let ac, let data = ac.pointee.data else { return }
            Unmanaged<RedisConnection>.fromOpaque(data).takeUnretainedValue().connected(status == REDIS_OK)
        }
        _ = redisAsyncSetDisconnectCallback(made) { ac, _ in
            guard let ac, let data = ac.pointee.data else { return }
            Unmanaged<RedisConnection>.fromOpaque(data).takeUnretainedValue().disconnected()
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

    private static func from(_ privdata: UnsafeMutableRawPointer?) -> RedisConnection {
        Unmanaged<RedisConnection>.fromOpaque(privdata!).takeUnretainedValue()
    }

    /// What the daemon installs to give descriptors back when the process
    /// has none left (the disk tier's kept files); returns how many.
    private static let descriptorRelief = Mutex<(@Sendable () -> Int)?>(nil)

    public static func installDescriptorRelief(_ relief: @escaping @Sendable () -> Int) {
        descriptorRelief.withLock { $0 = relief }
    }

    private static func relieveDescriptors() -> Int { descriptorRelief.withLock { $0 }?() ?? 0 }

    /// hiredis says why a socket failed in words ("Can't create socket: "
    /// and strerror's), not errno.
    private static func isOutOfDescriptors(_ message: String) -> Bool {
        message.hasSuffix(String(cString: strerror(EMFILE))) || message.hasSuffix(String(cString: strerror(ENFILE)))
    }

    private static func errorText(_ ac: UnsafePointer<redisAsyncContext>) -> String {
        ac.pointee.errstr.map { String(cString: $0) } ?? "error \(ac.pointee.err)"
    }

    // MARK: commands

    /// Sends one command (arguments as given, binary-safe); `reply` runs
    /// once on this loop: with Redis's reply, or the connection's failure.
    public func send(_ arguments: [String], timeoutMilliseconds: UInt64? = nil, reply: @escaping Reply) {
        send(arguments.map { Array($0.utf8) }, timeoutMilliseconds: timeoutMilliseconds, reply: reply)
    }

    public func send(_ arguments: [[UInt8]], timeoutMilliseconds: UInt64? = nil, reply: @escaping Reply) {
        guard let context, failure == nil else {
            let error = failure ?? RedisError("not connected")
            loop.execute { reply(.failure(error)) }
            return
        }
        let token = nextToken
        nextToken &+= 1
        let timeout = timeoutMilliseconds ?? commandTimeoutMilliseconds
        let timer = loop.schedule(after: timeout) { [weak self] in
            guard let self, self.waiting[token] != nil else { return }
            self.close(RedisError("Redis did not answer within \(timeout) ms"))
        }
        waiting[token] = Waiting(reply: reply, timer: timer)
        let status = withArgv(arguments) { argv, lengths in
            redisAsyncCommandArgv(context, { ac, reply, privdata in
                guard let ac, let data = ac.pointee.data else { return }
                let me = Unmanaged<RedisConnection>.fromOpaque(data).takeUnretainedValue()
                me.answered(UInt64(UInt(bitPattern: privdata)), reply?.assumingMemoryBound(to: redisReply.self), ac)
            }, UnsafeMutableRawPointer(bitPattern: UInt(token)), Int32(arguments.count), argv, lengths)
        }
        if status != REDIS_OK {
            // Its reply (the failure) comes on a later turn, as every reply does.
            let error = RedisError("cannot send to Redis: \(Self.errorText(context))")
            loop.execute { [weak self] in self?.close(error) }
        }
    }

    /// Subscribes to `channel` (the connection is then for subscriptions
    /// only): `subscribed` runs once Redis confirmed it, `message` with each
    /// message's payload. A failure of the
    /// connection ends it (`onClosed`).
    public func subscribe(_ channel: String, subscribed: @escaping () -> Void, message: @escaping ([UInt8]) -> Void) {
        let token = nextToken
        subscriptions[token] = { reply in
            // ["message", channel, payload]; the first reply confirms the subscription.
            let parts = reply.elements
            guard parts.count == 3 else { return }
            if parts[0].text == "message", case .string(let payload) = parts[2] { message(payload) }
            if parts[0].text == "subscribe" { subscribed() }
        }
        send(["SUBSCRIBE", channel]) { _ in }
    }

    private func withArgv<T>(_ arguments: [[UInt8]], _ body: (UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> T) -> T {
        // hiredis copies the arguments into its output buffer before returning.
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
        return argv.withUnsafeMutableBufferPointer { argvBuffer in
            lengths.withUnsafeBufferPointer { body(argvBuffer.baseAddress!, $0.baseAddress!) }
        }
    }

    /// No reply: the connection is going (every waiting command hears why).
    private func answered(_ token: UInt64, _ reply: UnsafeMutablePointer<redisReply>?, _ ac: UnsafePointer<redisAsyncContext>) {
        guard let reply else { return failAll(failure ?? Self.lost(ac)) }
        if let subscription = subscriptions[token] {
            if let waiter = waiting.removeValue(forKey: token) { loop.cancel(waiter.timer) }
            return subscription(RedisReply(reply))
        }
        guard let waiter = waiting.removeValue(forKey: token) else { return }
        loop.cancel(waiter.timer)
        waiter.reply(.success(RedisReply(reply)))
    }

    private static func lost(_ ac: UnsafePointer<redisAsyncContext>) -> RedisError {
        RedisError("the connection to Redis closed" + (ac.pointee.err != 0 ? ": \(errorText(ac))" : ""))
    }

    // MARK: the socket

    public func ready(_ events: IOEvents) {
        if !events.isDisjoint(with: [.read, .error, .hangup]), let context { redisAsyncHandleRead(context) }
        if events.contains(.write), let context { redisAsyncHandleWrite(context) }
    }

    private func want(_ event: IOEvents, _ on: Bool) {
        if on { interest.insert(event) } else { interest.remove(event) }
        guard fd >= 0 else { return }
        if watched {
            loop.setInterest(fd, interest)
        } else {
            watched = (try? loop.watch(fd, interest, self)) != nil
        }
    }

    /// hiredis is about to close the socket (and may still call back:
    /// this object outlives the current loop turn, though the loop's
    /// reference to it goes now).
    private func cleanup() {
        if watched { loop.unwatch(fd) }
        watched = false
        fd = -1
        loop.execute { withExtendedLifetime(self) {} }
    }

    private func connected(_ ok: Bool) {
        // On failure hiredis frees the context itself right after this.
        guard !ok, let context else { return }
        let error = failure ?? RedisError("cannot connect to Redis: \(Self.errorText(context))")
        self.context = nil
        failAll(error)
    }

    /// The server closed the connection, or it broke (hiredis frees it).
    private func disconnected() {
        guard let context else { return }
        let error = failure ?? Self.lost(context)
        self.context = nil
        failAll(error)
    }

    // MARK: closing

    /// Closes it now: every waiting command gets `error`, then `onClosed` runs.
    public func close(_ error: RedisError = RedisError("closed")) {
        guard failure == nil else { return }
        failure = error
        loop.cancel(connectTimer)
        if let context {
            self.context = nil
            redisAsyncFree(context)  // hands every waiting command a nil reply
        }
        failAll(error)
    }

    private func failAll(_ error: RedisError) {
        if failure == nil { failure = error }
        isReady = false
        loop.cancel(connectTimer)
        let left = waiting
        waiting = [:]
        subscriptions = [:]
        for (_, waiter) in left.sorted(by: { $0.key < $1.key }) {  // in the order sent
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
        loop.execute { [weak self] in self?.failAll(error) }
    }

    deinit {
        // Only reached when never watched (the loop holds a watched one):
        // nothing may call back into this object any more.
        guard let context else { return }
        context.pointee.data = nil
        context.pointee.ev = .init()
        redisAsyncFree(context)
    }
}
