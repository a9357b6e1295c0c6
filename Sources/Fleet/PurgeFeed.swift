import CacheSemantics
import Dispatch
import EventLoop
import Redis

/// The fleet's purges through one Redis stream. `publish` appends a purge
/// this node applied already (and says how many live nodes applied it
/// within a short wait); the feed reads every other node's purges as they
/// come (`XREAD BLOCK`) and hands them to `apply`. Each node records in
/// Redis the last purge it applied: a node that was stopped or cut off
/// replays what it missed when it comes back, and one that cannot know
/// what it missed (trimmed from the stream, Redis lost its data) is told
/// to drop everything first (`FeedStart`). Redis down: purges wait here
/// (bounded) and go out when it is back. Loop thread only.
public final class PurgeFeed {
    public struct Settings: Sendable {
        /// Where the master is (fixed, or followed through Sentinel).
        public var master: RedisMaster
        public var password: String?
        /// The fleet's name: the prefix of every key (two fleets may share a Redis).
        public var name: String
        public var node: String
        public var connectTimeoutMilliseconds: UInt64 = 2_000
        public var timeoutMilliseconds: UInt64 = 2_000
        /// How long `publish` waits for the other nodes.
        public var acknowledgeMilliseconds: UInt64 = 500
        /// Purges the stream keeps (about): a node away for longer drops everything.
        public var streamLength = 100_000
        /// Replicas that must hold a purge before it counts as delivered
        /// (`WAIT`, within `acknowledgeMilliseconds`); 0: none asked.
        public var replicas = 0

        public init(address: RedisAddress, password: String?, name: String, node: String) {
            self.init(master: RedisMaster(fixed: address), password: password, name: name, node: node)
        }

        public init(master: RedisMaster, password: String?, name: String, node: String) {
            self.master = master
            self.password = password
            self.name = name
            self.node = node
        }
    }

    /// How many nodes were live and how many had applied a purge when
    /// `publish` stopped waiting; `queued`: Redis was unreachable, the purge
    /// goes out when it is back.
    public struct Delivery: Equatable, Sendable {
        public var nodes: Int
        public var acknowledged: Int
        public var queued = false
        public var error: String?
        /// Replicas that held it when `WAIT` answered (nil: not asked).
        public var replicas: Int?
    }

    let settings: Settings
    let loop: EventLoop
    /// This node's clock against Redis's, measured at each `record`.
    public let clock: FleetClock
    private let apply: (FleetPurge) -> Void
    private let dropEverything: (String) -> Void
    private let log: @Sendable (String) -> Void
    /// Faults: each kind logged once every 10 s.
    private let faults: FaultLog
    private var reader: RedisConnection?
    var writer: RedisConnection?
    private var position: StreamID?
    /// Entries read since the stream began (FeedStart).
    private var consumed = 0
    private var reading = false
    /// The first read reached the stream's end: what this node missed is applied.
    private var caughtUp = false
    /// This node's live stamp is in Redis: other nodes count it.
    private var announced = false
    var waiting: [(Outgoing, (Delivery) -> Void)] = []
    /// Purges no replica was shown to hold (`WAIT`): sent again to a new
    /// master, which may never have had them.
    var unreplicated: [Outgoing] = []
    /// The master generation the connections were made to.
    private var generation: UInt64?
    /// The master changed since the position was read: the new one may
    /// lack purges this node applied (a replica that lagged).
    private var failedOver = false
    private var backoff = Backoff()
    private var stopped = false
    public private(set) var received = 0
    /// Of those, the ones missed while away (read before catching up).
    public private(set) var replayed = 0
    /// Live nodes seen at the last count (this one included) and that
    /// count's round trip.
    public private(set) var liveNodes = 0
    public private(set) var roundTripMicroseconds: Int?
    public internal(set) var sent = 0
    /// Where this node stands in the stream, for the shared tier's stores.
    public var mark: FleetMark?
    /// Told when this node has caught up with the stream (true: what it
    /// missed is applied) and when Redis is lost (false).
    public var onConnectionChange: ((Bool) -> Void)?
    public var queued: Int { waiting.count }
    /// The fleet's identity as this node last saw it (nil: it never joined
    /// with what it holds); `rememberFleetID` keeps a new one beside the
    /// disk tier, so a restarted node knows it too.
    public var knownFleetID: String?
    public var rememberFleetID: ((String) -> Void)?

    private var streamKey: String { "larder:\(settings.name):purges" }
    var positionsKey: String { "larder:\(settings.name):positions" }
    var aliveKey: String { "larder:\(settings.name):alive" }
    private var fleetIDKey: String { "larder:\(settings.name):fleet-id" }
    /// A node heard from within this long counts as live.
    static let liveMilliseconds: UInt64 = 5_000
    static let maxWaiting = 10_000

    /// `apply`: a purge from another node; `dropEverything`: this node
    /// missed purges it cannot know (the reason, for the log).
    public init(_ settings: Settings, loop: EventLoop, clock: FleetClock = FleetClock(), apply: @escaping (FleetPurge) -> Void,
                dropEverything: @escaping (String) -> Void, log: @escaping @Sendable (String) -> Void) {
        self.settings = settings
        self.loop = loop
        self.clock = clock
        self.apply = apply
        self.dropEverything = dropEverything
        self.log = log
        faults = FaultLog(log)
    }

    public func start() {
        stopped = false
        settings.master.watch(on: loop) { [weak self] in self?.masterChanged() }
        connect()
    }

    /// Sentinel named another master: the connections go to it at once.
    private func masterChanged() {
        guard !stopped, let current = settings.master.current, current.generation != generation else { return }
        if position != nil { failedOver = true }
        waiting += unreplicated.map { ($0, { _ in }) }
        unreplicated = []
        guard reader != nil || writer != nil else { return connect() }
        drop(RedisError("the master moved to \(current.address)"), again: 0)
    }

    public func stop() {
        stopped = true
        reader?.close()
        writer?.close()
        reader = nil
        writer = nil
    }

    /// Stops after telling the fleet this node is gone (so purges sent
    /// meanwhile are not counted as waiting on it); `done` runs once, on
    /// this loop, within the command timeout.
    public func leave(_ done: @escaping () -> Void) {
        guard let writer, writer.isReady else {
            stop()
            return done()
        }
        stopped = true
        writer.send(["HDEL", aliveKey, settings.node]) { [weak self] _ in
            self?.stop()
            done()
        }
    }

    /// Whether both connections are up and reading, and the fleet counts
    /// this node as live (a purge sent from now on waits for it).
    public var isConnected: Bool { reading && caughtUp && announced && writer?.isReady == true }

    /// Connected once caught up and counted live, whichever comes last.
    private func reportConnected() {
        guard caughtUp && announced else { return }
        settings.master.reached(true, now: EventLoop.nowMilliseconds())
        onConnectionChange?(true)
    }

    private func connect() {
        guard !stopped, reader == nil, let current = settings.master.current else { return }  // (a master named brings it)
        generation = current.generation
        current.address.whenResolved(on: loop) { [weak self] in self?.connect(to: $0) }
    }

    private func connect(to address: RedisAddress) {
        guard !stopped else { return }
        let master = settings.master.followsSentinel
        let make = { (extra: UInt64) in
            RedisConnection(address, password: self.settings.password, loop: self.loop,
                            connectTimeoutMilliseconds: self.settings.connectTimeoutMilliseconds,
                            commandTimeoutMilliseconds: self.settings.timeoutMilliseconds + extra, requireMaster: master,
                            tls: self.settings.master.tls)
        }
        // The writer's commands may queue behind a WAIT (its bound is theirs too).
        let reader = make(0), writer = make(settings.replicas > 0 ? settings.acknowledgeMilliseconds : 0)
        (self.reader, self.writer) = (reader, writer)
        for connection in [reader, writer] {
            connection.onClosed = { [weak self, weak connection] error in
                guard let self, let connection, connection === self.reader || connection === self.writer else { return }
                self.lost(error)
            }
        }
        reader.onReady = { [weak self] in self?.findPosition() }
        writer.onReady = { [weak self] in self?.sendWaiting() }
    }

    /// One connection failed: both go, and come back after a pause (the
    /// master doubted first: Sentinel may name another).
    func lost(_ error: RedisError) {
        if let generation { settings.master.doubt(generation) }
        drop(error, again: nil)
    }

    /// Closes both connections and connects again after `again` ms (nil: the backoff's pause).
    private func drop(_ error: RedisError, again: UInt64?) {
        settings.master.reached(false, now: EventLoop.nowMilliseconds())
        reading = false
        caughtUp = false
        announced = false
        onConnectionChange?(false)
        let (reader, writer) = (self.reader, self.writer)
        (self.reader, self.writer) = (nil, nil)
        reader?.close()
        writer?.close()
        note("fleet: Redis: \(error.description); serving from this node alone, retrying")
        guard !stopped else { return }
        if again != nil { backoff.reset() }
        loop.schedule(after: again ?? backoff.take()) { [weak self] in self?.connect() }
    }

    func note(_ text: String) { faults.note(text) }

    // MARK: reading

    /// First the fleet's identity: created once by the first node (`SET
    /// NX`), remembered by each node beside what it holds. Another one
    /// than remembered means Redis lost its data (a restart without
    /// persistence): places and stream are new, and say nothing of the
    /// purges this node missed.
    private func findPosition() {
        guard let reader else { return }
        reader.send(["SET", fleetIDKey, Self.newFleetID(), "NX"]) { _ in }
        reader.send(["GET", fleetIDKey]) { [weak self] result in
            guard let self, case .success(let reply) = result else { return }  // the connection failed: it comes back
            // Refused (an ACL without SET, say): the place and stream decide alone.
            if reply.text == nil { self.note("fleet: Redis did not keep the fleet's identity (\(reply)); a Redis that loses its data may go unnoticed") }
            self.findPlace(fleetID: reply.text)
        }
    }

    private static func newFleetID() -> String {
        String(UInt64.random(in: 1...UInt64.max), radix: 16) + String(UInt64.random(in: 1...UInt64.max), radix: 16)
    }

    private func findPlace(fleetID: String?) {
        guard let reader else { return }
        let sameFleet = fleetID == nil || knownFleetID.map { $0 == fleetID } ?? true
        reader.send(["HGET", positionsKey, settings.node]) { [weak self] result in
            guard let self, case .success(let reply) = result else { return }
            var recorded = reply.text.flatMap(Self.place)
            // After a failover this node's own place counts, and must be in
            // the new master's stream: a replica that lagged lacks it.
            var shown = true
            if self.failedOver, sameFleet, let position = self.position, position != .zero {
                if position > recorded?.id ?? .zero { recorded = (position, self.consumed) }
                reader.send(["XRANGE", self.streamKey, position.description, position.description]) { result in
                    if case .success(let reply) = result, case .array(let entries) = reply { shown = !entries.isEmpty }
                }
            }
            self.failedOver = false
            reader.send(["XINFO", "STREAM", self.streamKey]) { [weak self] result in
                guard let self else { return }
                let fields = Self.pairs(result)  // none when there is no stream yet
                var stream: FeedStart.Stream?
                if let last = fields["last-generated-id"].flatMap(StreamID.init), let added = fields["entries-added"].flatMap({ Int($0) }),
                   let length = fields["length"].flatMap({ Int($0) }) {
                    stream = FeedStart.Stream(lastGenerated: last, entriesAdded: added, length: length,
                                              maxDeleted: fields["max-deleted-entry-id"].flatMap(StreamID.init) ?? .zero)
                }
                switch FeedStart.decide(place: recorded, stream: stream, sameFleet: sameFleet, placeShown: shown) {
                case .from(let id, let consumed):
                    (self.position, self.consumed) = (id, consumed)
                    self.mark?.set(id)
                case .dropEverythingThenFrom(let id, let consumed, let reason):
                    self.log("fleet: dropping everything this node holds: \(reason)")
                    self.dropEverything(reason)
                    (self.position, self.consumed) = (id, consumed)
                    self.mark?.set(id)
                }
                if let fleetID, self.knownFleetID != fleetID {
                    self.knownFleetID = fleetID
                    self.rememberFleetID?(fleetID)
                }
                // Reading starts once the position is recorded: a node that
                // stops at once still replays from here when it is back.
                reader.send(["HSET", self.positionsKey, self.settings.node, self.placeText]) { [weak self] in
                    guard let self, case .success(let reply) = $0 else { return }
                    if reply.isReadOnlyError { return self.lost(RedisError("Redis is a replica now (READONLY)", notMaster: true)) }
                    self.backoff.reset()
                    self.reading = true
                    self.record()
                    self.read()
                }
            }
        }
    }

    private func read() {
        guard let reader, let position, reading else { return }
        // Until caught up, no BLOCK: an empty answer means nothing was missed.
        let block: UInt64 = 1_000, batch = 256
        let waiting = caughtUp ? ["BLOCK", String(block)] : []
        reader.send(["XREAD", "COUNT", String(batch)] + waiting + ["STREAMS", streamKey, position.description],
                    timeoutMilliseconds: block + settings.timeoutMilliseconds) { [weak self] result in
            guard let self, case .success(let reply) = result else { return }
            if case .error(let message) = reply {
                // Not a stream Larder can read (another program's key?): say so, try again later.
                self.note("fleet: cannot read the purge stream \(self.streamKey): \(message)")
                self.loop.schedule(after: 1_000) { [weak self] in self?.read() }
                return
            }
            var entries = 0
            for stream in reply.elements {
                for entry in stream.elements.dropFirst().first?.elements ?? [] {
                    entries += 1
                    let parts = entry.elements
                    guard parts.count == 2, let id = parts[0].text.flatMap(StreamID.init) else { continue }
                    self.position = id
                    self.mark?.set(id)
                    self.consumed += 1
                    let fields = parts[1].elements.map { $0.text ?? "" }
                    guard let purge = FleetPurge(fields: fields) else {
                        self.note("fleet: skipping purge stream entry \(id): not a purge (\(fields.prefix(8)))")
                        continue
                    }
                    if purge.node != self.settings.node {
                        self.received += 1
                        if !self.caughtUp { self.replayed += 1 }
                        self.apply(purge)
                    }
                }
            }
            self.record()
            if !self.caughtUp && entries < batch {
                self.caughtUp = true
                self.reportConnected()
            }
            self.read()
        }
    }

    /// Tells the fleet where this node stands and that it is live, and
    /// counts the live nodes; measures this node's clock against Redis's
    /// (`TIME`) first, timing that round trip, so that its stamp is in
    /// Redis's time.
    private func record() {
        guard let writer, position != nil else { return }
        writer.send(["HSET", positionsKey, settings.node, placeText]) { _ in }
        let (sentAt, sent) = (clock.localNow, DispatchTime.now().uptimeNanoseconds)
        writer.send(["TIME"]) { [weak self] result in
            guard let self, case .success(let reply) = result else { return }
            self.roundTripMicroseconds = Int((DispatchTime.now().uptimeNanoseconds - sent) / 1000)
            if self.clock.measure(sentAt: sentAt, receivedAt: self.clock.localNow, reply: reply),
               let offset = self.clock.offsetMilliseconds, let warning = FleetClock.warning(offsetMilliseconds: offset) {
                self.faults.note(warning)
            }
            guard let writer = self.writer else { return }
            writer.send(["HSET", self.aliveKey, self.settings.node, String(self.clock.fleetNow)]) { [weak self] result in
                guard let self, case .success = result, !self.announced else { return }
                self.announced = true
                self.reportConnected()
            }
            writer.send(["HGETALL", self.aliveKey]) { [weak self] result in
                guard let self, case .success = result else { return }
                self.liveNodes = Self.live(Self.pairs(result), now: self.clock.fleetNow).count
            }
        }
    }

    /// The nodes whose stamp (the fleet's milliseconds) is within
    /// `liveMilliseconds` of `now`.
    static func live(_ alive: [String: String], now: Int64) -> Set<String> {
        Set(alive.filter { now.minusSaturating(Int64($0.value) ?? 0).magnitude <= liveMilliseconds }.map(\.key))
    }

    /// A node's place as recorded: "ID CONSUMED".
    private var placeText: String { "\(position ?? .zero) \(consumed)" }

    static func place(_ text: String) -> (id: StreamID, consumed: Int)? {
        let parts = text.split(separator: " ")
        guard parts.count == 2, let id = StreamID(String(parts[0])), let consumed = Int(parts[1]) else { return nil }
        return (id, consumed)
    }

    static func pairs(_ result: Result<RedisReply, RedisError>) -> [String: String] {
        guard case .success(let reply) = result else { return [:] }
        let items = reply.elements
        var out: [String: String] = [:]
        for i in stride(from: 0, to: items.count - 1, by: 2) {
            if let name = items[i].text, let value = items[i + 1].text { out[name] = value }
        }
        return out
    }
}
