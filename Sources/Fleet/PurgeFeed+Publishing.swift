import EventLoop
import Redis

/// Publishing: a purge this node applied goes into the stream (and, with
/// Sentinel, onto a replica: `WAIT`), then the live nodes' places are
/// counted until they all applied it or the wait is over.
extension PurgeFeed {
    /// A purge on its way out, with the stored keys a URL purge names.
    struct Outgoing {
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
                if case .success(let reply) = result, reply.isReadOnlyError {
                    // The master became a replica: Sentinel names the new one.
                    self.lost(RedisError("Redis refused a purge as a replica (READONLY)", notMaster: true))
                } else if case .success = result {
                    self.note("fleet: Redis refused a purge: \(why); trying again")
                    self.loop.schedule(after: 1_000) { [weak self] in self?.sendWaiting() }
                }
                return delivered(Delivery(nodes: 0, acknowledged: 0, queued: true, error: why))
            }
            self.sent += 1
            let deadline = self.loop.now() + self.settings.acknowledgeMilliseconds
            guard self.settings.replicas > 0 else { return self.awaitAcknowledgements(of: id, until: deadline, delivered) }
            self.awaitReplicas(of: outgoing, on: writer) { [weak self] replicas in
                self?.awaitAcknowledgements(of: id, until: deadline) { delivery in
                    var delivery = delivery
                    delivery.replicas = replicas
                    delivered(delivery)
                }
            }
        }
    }

    /// `WAIT`: how many replicas hold the purge (and every write before it
    /// on this connection) within the bound. One that none was shown to
    /// hold is kept, to go to a new master if there is a failover; a later
    /// one that is held shows the earlier ones are too.
    private func awaitReplicas(of outgoing: Outgoing, on writer: RedisConnection, _ done: @escaping (Int?) -> Void) {
        let bound = settings.acknowledgeMilliseconds
        writer.send(["WAIT", String(settings.replicas), String(bound)], timeoutMilliseconds: bound + settings.timeoutMilliseconds) {
            [weak self] result in
            guard let self else { return }
            guard case .success(.integer(let replicas)) = result else {
                self.keepUnreplicated(outgoing)
                return done(nil)
            }
            if replicas >= self.settings.replicas { self.unreplicated = [] } else { self.keepUnreplicated(outgoing) }
            done(replicas)
        }
    }

    private func keepUnreplicated(_ outgoing: Outgoing) {
        if unreplicated.count >= Self.maxWaiting { unreplicated.removeFirst() }
        unreplicated.append(outgoing)
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

    func sendWaiting() {
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
}
