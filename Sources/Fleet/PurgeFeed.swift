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
        public var address: RedisAddress
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

        public init(address: RedisAddress, password: String?, name: String, node: String) {
            self.address = address
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
    }

    private let settings: Settings
    private let loop: EventLoop
    /// This node's clock against Redis's, measured at each `record`.
    public let clock: FleetClock
    private let apply: (FleetPurge) -> Void
    private let dropEverything: (String) -> Void
    private let log: @Sendable (String) -> Void
    /// Faults: each kind logged once every 10 s.
    private let faults: FaultLog
    private var reader: RedisConnection?
    private var writer: RedisConnection?
    private var position: StreamID?
    /// Entries read since the stream began (FeedStart).
    private var consumed = 0
    private var reading = false
    /// The first read reached the stream's end: what this node missed is applied.
    private var caughtUp = false
    /// This node's live stamp is in Redis: other nodes count it.
    private var announced = false
    private var waiting: [(Outgoing, (Delivery) -> Void)] = []
    private var backoff = Backoff()
    private var stopped = false
    public private(set) var received = 0
    /// Of those, the ones missed while away (read before catching up).
    public private(set) var replayed = 0
    /// Live nodes seen at the last count (this one included) and that
    /// count's round trip.
    public private(set) var liveNodes = 0
    public private(set) var roundTripMicroseconds: Int?
    public private(set) var sent = 0
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
    private var positionsKey: String { "larder:\(settings.name):positions" }
    private var aliveKey: String { "larder:\(settings.name):alive" }
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
        connect()
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
        if caughtUp && announced { onConnectionChange?(true) }
    }

    private func connect() {
        guard !stopped else { return }
        settings.address.whenResolved(on: loop) { [weak self] in self?.connect(to: $0) }
    }

    private func connect(to address: RedisAddress) {
        guard !stopped else { return }
        let make = { RedisConnection(address, password: self.settings.password, loop: self.loop,
                                     connectTimeoutMilliseconds: self.settings.connectTimeoutMilliseconds,
                                     commandTimeoutMilliseconds: self.settings.timeoutMilliseconds) }
        let reader = make(), writer = make()
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

    /// One connection failed: both go, and come back after a pause.
    private func lost(_ error: RedisError) {
        reading = false
        caughtUp = false
        announced = false
        onConnectionChange?(false)
        let (reader, writer) = (self.reader, self.writer)
        (self.reader, self.writer) = (nil, nil)
        reader?.close()
        writer?.close()
        note("fleet: Redis at \(settings.address): \(error.description); serving from this node alone, retrying")
        guard !stopped else { return }
        loop.schedule(after: backoff.take()) { [weak self] in self?.connect() }
    }

    private func note(_ text: String) { faults.note(text) }

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
            let recorded = reply.text.flatMap(Self.place)
            reader.send(["XINFO", "STREAM", self.streamKey]) { [weak self] result in
                guard let self else { return }
                let fields = Self.pairs(result)  // none when there is no stream yet
                var stream: FeedStart.Stream?
                if let last = fields["last-generated-id"].flatMap(StreamID.init), let added = fields["entries-added"].flatMap({ Int($0) }),
                   let length = fields["length"].flatMap({ Int($0) }) {
                    stream = FeedStart.Stream(lastGenerated: last, entriesAdded: added, length: length,
                                              maxDeleted: fields["max-deleted-entry-id"].flatMap(StreamID.init) ?? .zero)
                }
                switch FeedStart.decide(place: recorded, stream: stream, sameFleet: sameFleet) {
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
                    guard let self, case .success = $0 else { return }
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
    private static func live(_ alive: [String: String], now: Int64) -> Set<String> {
        Set(alive.filter { now.minusSaturating(Int64($0.value) ?? 0).magnitude <= liveMilliseconds }.map(\.key))
    }

    // MARK: publishing

    /// A purge on its way out, with the stored keys a URL purge names.
    private struct Outgoing {
        var purge: FleetPurge
        var keys: [String]
        var prefixes: [String] = []
        var tags: [String] = []
    }

    /// Sends a purge this node applied (`keys`: the stored keys a URL purge
    /// names, its target's and its route's; `prefixes`: with virtual hosts,
    /// the path's keys on every host; `tags`: the URL's cached POST
    /// queries); it leaves the shared tier in the same step. `delivered` runs once on this loop.
    public func publish(_ purge: FleetPurge, keys: [String] = [], prefixes: [String] = [], tags: [String] = [],
                        delivered: @escaping (Delivery) -> Void) {
        send(Outgoing(purge: purge, keys: keys, prefixes: prefixes, tags: tags), delivered: delivered)
    }

    private func send(_ outgoing: Outgoing, delivered: @escaping (Delivery) -> Void) {
        guard let writer, writer.isReady else {
            if waiting.count >= Self.maxWaiting { waiting.removeFirst() }
            waiting.append((outgoing, { _ in }))
            loop.execute { delivered(Delivery(nodes: 0, acknowledged: 0, queued: true, error: "Redis is unreachable")) }
            return
        }
        writer.send(purgeCommand(outgoing)) { [weak self] result in
            guard let self else { return }
            guard case .success(let reply) = result, let id = reply.text.flatMap(StreamID.init) else {
                // Not sent: it goes again when Redis is back, or (an error reply, such as
                // LOADING while Redis starts) in a second.
                self.waiting.append((outgoing, { _ in }))
                let why: String
                if case .success(let reply) = result { why = "\(reply)" } else if case .failure(let error) = result { why = error.description } else { why = "" }
                if case .success = result {
                    self.note("fleet: Redis refused a purge: \(why); trying again")
                    self.loop.schedule(after: 1_000) { [weak self] in self?.sendWaiting() }
                }
                return delivered(Delivery(nodes: 0, acknowledged: 0, queued: true, error: why))
            }
            self.sent += 1
            self.awaitAcknowledgements(of: id, until: self.loop.now() + self.settings.acknowledgeMilliseconds, delivered)
        }
    }

    /// The purge script's command (SharedScripts.purge).
    private func purgeCommand(_ outgoing: Outgoing) -> [[UInt8]] {
        var kind = "all", target: [UInt8] = [], upper: [UInt8] = Array("+".utf8), keys: [String] = []
        switch outgoing.purge.scope {
        case .key(let key): (kind, keys) = ("keys", outgoing.keys.isEmpty ? [key] : outgoing.keys)
        case .prefix(let prefix):
            (kind, target) = ("prefix", Array(prefix.utf8))
            if let next = SharedKeys.successor(of: target) { upper = Array("(".utf8) + next }
        case .tag(let tag): (kind, target) = ("tag", Array(tag.utf8))
        case .regex(let pattern):
            // The shared tier cannot run the expression: it drops the
            // literal prefix every match has (everything without one).
            let prefix = pattern.literalPrefix
            if !prefix.isEmpty {
                (kind, target) = ("prefix", Array(prefix.utf8))
                if let next = SharedKeys.successor(of: target) { upper = Array("(".utf8) + next }
            }
        case .all: break
        }
        let prefixes = kind == "keys" ? outgoing.prefixes : [], tags = kind == "keys" ? outgoing.tags : []
        let head: [[UInt8]] = [Array("EVAL".utf8), Array(SharedScripts.purge.utf8), Array("0".utf8),
                               Array(SharedKeys.prefix(settings.name).utf8), Array(kind.utf8), target, upper,
                               Array(String(settings.streamLength).utf8), Array(String(keys.count).utf8)]
        return head + keys.map { Array($0.utf8) } + [Array(String(prefixes.count).utf8)] + prefixes.map { Array($0.utf8) }
            + [Array(String(tags.count).utf8)] + tags.map { Array($0.utf8) } + outgoing.purge.fields.map { Array($0.utf8) }
    }

    private func sendWaiting() {
        let queued = waiting
        waiting = []
        for (outgoing, delivered) in queued { send(outgoing, delivered: delivered) }
    }

    /// Counts the live nodes whose position reached `id`, again every few
    /// milliseconds until all have or the wait is over.
    private func awaitAcknowledgements(of id: StreamID, until deadline: UInt64, _ delivered: @escaping (Delivery) -> Void) {
        guard let writer else { return delivered(Delivery(nodes: 0, acknowledged: 0, error: "Redis connection lost")) }
        // Both sent at once; replies come in order, so `alive` is in when `positions` arrives.
        var alive: Result<RedisReply, RedisError> = .failure(RedisError("no reply"))
        writer.send(["HGETALL", aliveKey]) { alive = $0 }
        writer.send(["HGETALL", positionsKey]) { [weak self] positions in
            guard let self else { return }
            var live = Self.live(Self.pairs(alive), now: self.clock.fleetNow)
            live.insert(self.settings.node)  // it applied the purge before sending it
            let at = Self.pairs(positions)
            let acknowledged = live.filter { $0 == self.settings.node || (at[$0].flatMap(Self.place)?.id ?? .zero) >= id }
            let delivery = Delivery(nodes: live.count, acknowledged: acknowledged.count)
            if delivery.acknowledged >= delivery.nodes || self.loop.now() >= deadline { return delivered(delivery) }
            self.loop.schedule(after: 2) { [weak self] in self?.awaitAcknowledgements(of: id, until: deadline, delivered) }
        }
    }

    /// A node's place as recorded: "ID CONSUMED".
    private var placeText: String { "\(position ?? .zero) \(consumed)" }

    private static func place(_ text: String) -> (id: StreamID, consumed: Int)? {
        let parts = text.split(separator: " ")
        guard parts.count == 2, let id = StreamID(String(parts[0])), let consumed = Int(parts[1]) else { return nil }
        return (id, consumed)
    }

    private static func pairs(_ result: Result<RedisReply, RedisError>) -> [String: String] {
        guard case .success(let reply) = result else { return [:] }
        let items = reply.elements
        var out: [String: String] = [:]
        for i in stride(from: 0, to: items.count - 1, by: 2) {
            if let name = items[i].text, let value = items[i + 1].text { out[name] = value }
        }
        return out
    }
}
