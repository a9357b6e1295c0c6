import CacheStorage
import EventLoop
import Redis
import Synchronization

/// The fleet's shared tier as one worker sees it: its own Redis connection
/// on the worker's loop (a worker never blocks on Redis). A lookup is one
/// script (`SharedScripts.lookup`: a key's variants, none larger than the
/// shared tier takes); a store another (`SharedScripts.store`). While Redis is
/// unreachable it answers nothing (`lookup` returns false at once), so the
/// worker serves from its local tiers and the upstream as if alone, and
/// the connection comes back with backoff. Loop thread only.
public final class RedisSharedTier: SharedTier {
    public struct Settings: Sendable {
        /// Where the master is (fixed, or followed through Sentinel).
        public var master: RedisMaster
        public var password: String?
        public var name: String
        /// This node's name (its claims carry it).
        public var node = "larder"
        public var connectTimeoutMilliseconds: UInt64 = 2_000
        public var timeoutMilliseconds: UInt64 = 2_000
        public var maxObjectBytes = 1 << 20

        public init(address: RedisAddress, password: String?, name: String) {
            self.init(master: RedisMaster(fixed: address), password: password, name: name)
        }

        public init(master: RedisMaster, password: String?, name: String) {
            self.master = master
            self.password = password
            self.name = name
        }
    }

    private let settings: Settings
    private let loop: EventLoop
    private let mark: FleetMark
    private let clock: FleetClock
    private let faults: FaultLog
    private let prefix: String
    private var connection: RedisConnection?
    /// Subscribed to the fleet's wake-ups (`larder:NAME:fetched`).
    private var subscriber: RedisConnection?
    private var subscribed = false
    private var countedReady = false
    /// Requests waiting for a key another node fetches, by key.
    private var waiting: [String: [UInt64: Waiter]] = [:]
    /// This worker's claims: key -> the claim's token.
    private var held: [String: String] = [:]
    private var nextWaiter: UInt64 = 0
    private struct Waiter {
        let outcome: (FleetClaim) -> Void
        let timer: TimerID
    }
    private var backoff = Backoff()
    private var stopped = false
    private let counts: SharedTierCounts
    /// The master generation the connections were made to.
    private var generation: UInt64?

    /// `mark`: the fleet thread's place in the purge stream; `clock`: this
    /// node's clock against Redis's (the purge feed's); `counts` and
    /// `faults`: shared by the node's workers.
    public init(_ settings: Settings, loop: EventLoop, mark: FleetMark, clock: FleetClock = FleetClock(), counts: SharedTierCounts,
                faults: FaultLog) {
        self.settings = settings
        self.counts = counts
        self.loop = loop
        self.mark = mark
        self.clock = clock
        self.faults = faults
        prefix = SharedKeys.prefix(settings.name)
    }

    /// Connects from the worker's loop (call from any thread).
    public func start() {
        settings.master.watch(on: loop) { [weak self] in self?.masterChanged() }
        loop.execute { [weak self] in self?.connect() }
    }

    /// Sentinel named another master: the connections go to it at once.
    private func masterChanged() {
        guard !stopped, let current = settings.master.current, current.generation != generation else { return }
        guard connection != nil else { return connect() }
        drop(RedisError("the master moved to \(current.address)"), again: 0)
    }

    public func stop() {
        stopped = true
        connection?.close()
        subscriber?.close()
        (connection, subscriber) = (nil, nil)
    }

    private func connect() {
        guard !stopped, connection == nil, let current = settings.master.current else { return }  // (a master named brings it)
        generation = current.generation
        current.address.whenResolved(on: loop) { [weak self] in self?.connect(to: $0) }
    }

    private func connect(to address: RedisAddress) {
        guard !stopped else { return }
        let master = settings.master.followsSentinel
        let make = { RedisConnection(address, password: self.settings.password, loop: self.loop,
                                     connectTimeoutMilliseconds: self.settings.connectTimeoutMilliseconds,
                                     commandTimeoutMilliseconds: self.settings.timeoutMilliseconds, requireMaster: master,
                                     tls: self.settings.master.tls) }
        let connection = make(), subscriber = make()
        (self.connection, self.subscriber) = (connection, subscriber)
        connection.onReady = { [weak self] in self?.readyChanged() }
        subscriber.onReady = { [weak self, weak subscriber] in
            subscriber?.subscribe(SharedKeys.prefix(self?.settings.name ?? "") + "fetched",
                                  subscribed: { self?.subscribed = true; self?.readyChanged() },
                                  message: { self?.wake(String(decoding: $0, as: UTF8.self)) })
        }
        for each in [connection, subscriber] {
            each.onClosed = { [weak self, weak each] error in
                guard let self, let each, each === self.connection || each === self.subscriber else { return }
                self.lost(error)
            }
        }
    }

    /// Both connections up (and subscribed): counted as connected.
    public var isReady: Bool { connection?.isReady == true && subscribed }

    private func readyChanged() {
        guard isReady, !countedReady else { return }
        countedReady = true
        backoff.reset()
        counts.connected.wrappingAdd(1, ordering: .relaxed)
    }

    /// One connection failed: both go (waiting requests fetch alone), and
    /// come back after a pause (the master doubted first: Sentinel may name another).
    private func lost(_ error: RedisError) {
        if let generation { settings.master.doubt(generation) }
        drop(error, again: nil)
    }

    /// Closes both connections and connects again after `again` ms (nil: the backoff's pause).
    private func drop(_ error: RedisError, again: UInt64?) {
        if countedReady { counts.connected.wrappingSubtract(1, ordering: .relaxed) }
        countedReady = false
        let (connection, subscriber) = (self.connection, self.subscriber)
        (self.connection, self.subscriber, subscribed) = (nil, nil, false)
        connection?.close()
        subscriber?.close()
        held = [:]
        for key in Array(waiting.keys) { wake(key) }
        counts.errors.wrappingAdd(1, ordering: .relaxed)
        note("fleet: shared tier: Redis: \(error.description); serving from this node alone, retrying")
        guard !stopped else { return }
        if again != nil { backoff.reset() }
        loop.schedule(after: again ?? backoff.take()) { [weak self] in self?.connect() }
    }

    private func note(_ text: String) { faults.note(text) }

    public func fetchMark() -> SharedMark { mark.current }

    public var maxObjectBytes: Int { settings.maxObjectBytes }
    /// The largest record a lookup reads: a body of `maxObjectBytes` and
    /// its head (bounded by the head limits Larder parses with), with room.
    var recordBound: Int { settings.maxObjectBytes + 256 * 1024 }

    public func lookup(_ key: String, found: @escaping (Variants) -> Void) -> Bool {
        guard let connection, connection.isReady else { return false }
        counts.lookups.wrappingAdd(1, ordering: .relaxed)
        connection.send(["EVAL", SharedScripts.lookup, "0", prefix + "obj:" + key, String(recordBound)]) { [weak self] result in
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
        var items = reply.elements
        if case .integer(let skipped) = items.first {
            items.removeFirst()
            if skipped > 0 {
                counts.errors.wrappingAdd(1, ordering: .relaxed)
                note("fleet: shared tier: skipping \(skipped) stored record(s) of \(key) larger than max_object_size (not read)")
            }
        }
        var entries: [CachedResponse] = []
        for index in stride(from: 1, to: items.count, by: 2) {
            guard case .string(let bytes) = items[index] else { continue }
            do {
                // Stored in Redis's time: read in this node's.
                if let entry = try DiskFormat.response(bytes, key: key, shiftSeconds: -clock.shiftSeconds) { entries.append(entry) }
            } catch .unsupportedVersion(let version) {
                // A node of another release wrote it (a rolling upgrade): a miss here.
                note("fleet: shared tier: skipping a stored record of \(key) in format \(version) (this node reads \(DiskFormat.version))")
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
        guard let lifetime = SharedKeys.lifetimeMilliseconds(of: entry, now: now), let local = DiskRecord(entry, storedAt: now) else { return }
        // Times in Redis's, so that a node whose clock differs reads the right age.
        let record = DiskFormat.shifted(local, bySeconds: clock.shiftSeconds)
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
                if reply.isReadOnlyError { self.lost(RedisError("Redis is a replica now (READONLY)", notMaster: true)) }
            default: break
            }
        }
    }
}

// MARK: claims: collapsing across the fleet

extension RedisSharedTier {
    public func claim(_ key: String, milliseconds: UInt64, outcome: @escaping (FleetClaim) -> Void) -> Bool {
        guard let connection, isReady, held[key] == nil else { return false }
        // Waiting from before the claim is sent: the wake-up may come before its reply.
        nextWaiter &+= 1
        let id = nextWaiter
        let timer = loop.schedule(after: milliseconds) { [weak self] in self?.end(key, id, .waited) }
        waiting[key, default: [:]][id] = Waiter(outcome: outcome, timer: timer)
        let token = settings.node + ":" + String(UInt64.random(in: 1...UInt64.max), radix: 36)
        connection.send(["EVAL", SharedScripts.claim, "0", prefix, key, token, settings.node + ":", String(milliseconds)]) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(.integer(1)):
                // Claimed; if this request stopped waiting meanwhile, give the claim back at once.
                self.held[key] = token
                if !self.end(key, id, .claimed) { self.release(key) }
            case .success(.integer(0)):
                self.counts.waits.wrappingAdd(1, ordering: .relaxed)  // woken by the claimant's release, or the timer
            case .success(.integer(2)):
                self.end(key, id, .stored)
            default:
                self.end(key, id, .waited)
            }
        }
        return true
    }

    public func release(_ key: String) {
        guard let token = held.removeValue(forKey: key), let connection else { return }
        connection.send(["EVAL", SharedScripts.release, "0", prefix, key, token]) { _ in }
    }

    /// Another node's claim on `key` was released (or Redis was lost).
    private func wake(_ key: String) {
        for id in Array((waiting[key] ?? [:]).keys) { end(key, id, .waited) }
    }

    /// Tells a waiting request, once; false when it was told already.
    @discardableResult
    private func end(_ key: String, _ id: UInt64, _ outcome: FleetClaim) -> Bool {
        guard let waiter = waiting[key]?.removeValue(forKey: id) else { return false }
        if waiting[key]?.isEmpty == true { waiting[key] = nil }
        loop.cancel(waiter.timer)
        waiter.outcome(outcome)
        return true
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
    /// Misses that waited for another node's fetch.
    public let waits = Atomic<Int>(0)
    /// Workers connected to Redis now.
    public let connected = Atomic<Int>(0)
    public init() {}
}
