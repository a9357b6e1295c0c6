import CacheStorage
import EventLoop
import Redis
import Synchronization

/// The fleet's shared tier as one worker sees it: its own Redis connection
/// on the worker's loop (a worker never blocks on Redis). A lookup is one
/// HGETALL; a store one script (`SharedScripts.store`). While Redis is
/// unreachable it answers nothing (`lookup` returns false at once), so the
/// worker serves from its local tiers and the upstream as if alone, and
/// the connection comes back with backoff. Loop thread only.
public final class RedisSharedTier: SharedTier {
    public struct Settings: Sendable {
        public var address: RedisAddress
        public var password: String?
        public var name: String
        public var connectTimeoutMilliseconds: UInt64 = 2_000
        public var timeoutMilliseconds: UInt64 = 2_000
        public var maxObjectBytes = 1 << 20

        public init(address: RedisAddress, password: String?, name: String) {
            self.address = address
            self.password = password
            self.name = name
        }
    }

    private let settings: Settings
    private let loop: EventLoop
    private let mark: FleetMark
    private let log: (String) -> Void
    private let prefix: String
    private var connection: RedisConnection?
    private var retryMilliseconds: UInt64 = 100
    private var stopped = false
    private var lastNote: (text: String, at: UInt64)?
    public var maxObjectBytes: Int { settings.maxObjectBytes }
    private let counts: SharedTierCounts

    /// `mark`: the fleet thread's place in the purge stream; `log`: faults,
    /// once per kind every 10 s.
    public init(_ settings: Settings, loop: EventLoop, mark: FleetMark, counts: SharedTierCounts, log: @escaping (String) -> Void) {
        self.settings = settings
        self.counts = counts
        self.loop = loop
        self.mark = mark
        self.log = log
        prefix = SharedKeys.prefix(settings.name)
    }

    /// Connects from the worker's loop (call from any thread).
    public func start() {
        loop.execute { [weak self] in self?.connect() }
    }

    public func stop() {
        stopped = true
        connection?.close()
        connection = nil
    }

    private func connect() {
        guard !stopped else { return }
        let connection = RedisConnection(settings.address, password: settings.password, loop: loop,
                                         connectTimeoutMilliseconds: settings.connectTimeoutMilliseconds,
                                         commandTimeoutMilliseconds: settings.timeoutMilliseconds)
        self.connection = connection
        connection.onReady = { [weak self] in
            guard let self else { return }
            self.retryMilliseconds = 100
            self.counts.connected.wrappingAdd(1, ordering: .relaxed)
        }
        connection.onClosed = { [weak self, weak connection] error in
            guard let self, let connection, connection === self.connection else { return }
            if connection.wasReady { self.counts.connected.wrappingSubtract(1, ordering: .relaxed) }
            self.connection = nil
            self.counts.errors.wrappingAdd(1, ordering: .relaxed)
            self.note("fleet: shared tier: Redis at \(self.settings.address): \(error.description); serving from this node alone, retrying")
            guard !self.stopped else { return }
            self.loop.schedule(after: self.retryMilliseconds) { [weak self] in self?.connect() }
            self.retryMilliseconds = min(self.retryMilliseconds * 2, 5_000)
        }
    }

    private func note(_ text: String) {
        let now = EventLoop.nowMilliseconds()
        if let last = lastNote, last.text == text, now &- last.at < 10_000 { return }
        lastNote = (text, now)
        log(text)
    }

    public func fetchMark() -> SharedMark { mark.current }

    public func lookup(_ key: String, found: @escaping (Variants) -> Void) -> Bool {
        guard let connection, connection.isReady else { return false }
        counts.lookups.wrappingAdd(1, ordering: .relaxed)
        connection.send(["HGETALL", prefix + "obj:" + key]) { [weak self] result in
            guard let self else { return found(Variants()) }
            found(self.variants(result, key: key))
        }
        return true
    }

    /// The records of a lookup's reply; one that does not decode (another
    /// program's data, a format Larder no longer reads) is skipped.
    private func variants(_ result: Result<RedisReply, RedisError>, key: String) -> Variants {
        guard case .success(let reply) = result else { return Variants() }
        if case .error(let message) = reply {
            counts.errors.wrappingAdd(1, ordering: .relaxed)
            note("fleet: shared tier: Redis refused a lookup: \(message)")
            return Variants()
        }
        let items = reply.elements
        var entries: [CachedResponse] = []
        for index in stride(from: 1, to: items.count, by: 2) {
            guard case .string(let bytes) = items[index] else { continue }
            do {
                if let entry = try DiskFormat.response(bytes, key: key) { entries.append(entry) }
            } catch {
                note("fleet: shared tier: skipping a stored record of \(key) that is not Larder's (\(error))")
            }
        }
        if !entries.isEmpty { counts.found.wrappingAdd(1, ordering: .relaxed) }
        return Variants(entries)
    }

    public func store(_ entry: CachedResponse, fetchedAt mark: SharedMark) {
        guard let connection, connection.isReady, entry.bodyFile == nil, entry.bodyLength <= settings.maxObjectBytes else { return }
        let now = EventLoop.wallSeconds()
        guard let lifetime = SharedKeys.lifetimeMilliseconds(of: entry, now: now), let record = DiskRecord(entry, storedAt: now) else { return }
        let key = entry.key
        var command: [[UInt8]] = [Array("EVAL".utf8), Array(SharedScripts.store.utf8), Array("0".utf8), Array(prefix.utf8),
                                  Array(key.utf8), SharedKeys.variantField(entry.varyValues), DiskFormat.encode(record),
                                  Array(String(lifetime).utf8), Array(String(mark.milliseconds).utf8),
                                  Array(String(mark.sequence).utf8)]
        command += entry.tags.map { Array($0.utf8) }
        connection.send(command) { [weak self] result in
            guard let self, case .success(let reply) = result else { return }
            switch reply {
            case .integer(1): self.counts.stores.wrappingAdd(1, ordering: .relaxed)
            case .integer(0): self.counts.storesRefused.wrappingAdd(1, ordering: .relaxed)
            case .error(let message):
                self.counts.errors.wrappingAdd(1, ordering: .relaxed)
                self.note("fleet: shared tier: Redis refused a store: \(message)")
            default: break
            }
        }
    }
}

/// What the shared tiers of one node's workers did, together (misses
/// only: no hit touches these).
public final class SharedTierCounts: Sendable {
    public let lookups = Atomic<Int>(0)
    /// Lookups that found something.
    public let found = Atomic<Int>(0)
    /// Responses Redis took.
    public let stores = Atomic<Int>(0)
    /// Stores Redis refused: a purge was published while they were fetched.
    public let storesRefused = Atomic<Int>(0)
    public let errors = Atomic<Int>(0)
    /// Workers connected to Redis now.
    public let connected = Atomic<Int>(0)
    public init() {}
}
