import EventLoop
import Redis

/// Follows the master Redis Sentinel names for a fleet: asks a sentinel
/// (`SENTINEL get-master-addr-by-name`), one after another until one
/// answers, and stays subscribed to one sentinel's `+switch-master`, so a
/// failover moves every connection of the node to the new master at once
/// (`RedisMaster.set`). It asks again when a connection doubts the master
/// (a replica's READONLY, a `ROLE` that is not master, a lost connection),
/// when its subscription is lost, and every `pollMilliseconds` in case an
/// announcement was missed. Sentinels may be unreachable one at a time:
/// the next one is asked. Loop thread only (the fleet's loop).
public final class SentinelWatcher {
    public struct Settings: Sendable {
        public var sentinels: [RedisAddress]
        public var masterName: String
        public var password: String?
        public var connectTimeoutMilliseconds: UInt64 = 2_000
        public var timeoutMilliseconds: UInt64 = 2_000
        public var pollMilliseconds: UInt64 = 2_000

        public init(sentinels: [RedisAddress], masterName: String, password: String?) {
            (self.sentinels, self.masterName, self.password) = (sentinels, masterName, password)
        }
    }

    private let settings: Settings
    private let master: RedisMaster
    private let loop: EventLoop
    private let faults: FaultLog
    /// The sentinel asked first next time (the last that answered).
    private var next = 0
    private var question: RedisConnection?
    private var asking = false
    private var askAgain = false
    private var subscriber: RedisConnection?
    private var subscribedTo = 0
    /// Between subscription attempts (every sentinel may be down).
    private var backoff = Backoff()
    private var stopped = false

    public init(_ settings: Settings, master: RedisMaster, loop: EventLoop, log: @escaping @Sendable (String) -> Void) {
        precondition(!settings.sentinels.isEmpty, "a SentinelWatcher needs sentinels")
        self.settings = settings
        self.master = master
        self.loop = loop
        faults = FaultLog(log)
        master.onDoubt { [weak self, loop] _ in loop.execute { self?.ask() } }
    }

    public func start() {
        stopped = false
        ask()
        subscribe()
        poll()
    }

    public func stop() {
        stopped = true
        question?.close()
        subscriber?.close()
        (question, subscriber) = (nil, nil)
    }

    private func poll() {
        loop.schedule(after: settings.pollMilliseconds) { [weak self] in
            guard let self, !self.stopped else { return }
            self.ask()
            self.poll()
        }
    }

    private func connection(to sentinel: RedisAddress, _ made: @escaping (RedisConnection) -> Void) {
        sentinel.whenResolved(on: loop) { [weak self] address in
            guard let self, !self.stopped else { return }
            made(RedisConnection(address, password: self.settings.password, loop: self.loop,
                                 connectTimeoutMilliseconds: self.settings.connectTimeoutMilliseconds,
                                 commandTimeoutMilliseconds: self.settings.timeoutMilliseconds))
        }
    }

    // MARK: asking

    /// Asks the sentinels for the master (one question at a time; a call
    /// meanwhile asks once more after it).
    func ask() {
        guard !stopped else { return }
        guard !asking else { return askAgain = true }
        asking = true
        ask(sentinel: next, tried: 0)
    }

    private func ask(sentinel index: Int, tried: Int) {
        guard !stopped else { return }
        let count = settings.sentinels.count
        guard tried < count else {
            faults.note("fleet: no sentinel answered for master \(settings.masterName); serving from this node alone, asking again")
            return finishAsking(after: 500)
        }
        let sentinel = settings.sentinels[index % count]
        connection(to: sentinel) { [weak self] connection in
            guard let self else { return }
            self.question = connection
            var answered = false
            connection.onClosed = { [weak self] error in
                guard let self, !answered else { return }
                self.faults.note("fleet: sentinel \(sentinel): \(error.description)")
                self.ask(sentinel: index + 1, tried: tried + 1)
            }
            connection.send(["SENTINEL", "get-master-addr-by-name", self.settings.masterName]) { [weak self] result in
                guard let self, case .success(let reply) = result else { return }  // onClosed tries the next
                answered = true
                self.loop.execute { connection.close() }
                guard let address = Sentinel.masterAddress(reply) else {
                    self.faults.note("fleet: sentinel \(sentinel) names no master \(self.settings.masterName) (\(reply))")
                    return self.ask(sentinel: index + 1, tried: tried + 1)
                }
                self.next = index % count
                self.take(address, from: sentinel)
                self.finishAsking(after: 0)
            }
        }
    }

    private func finishAsking(after milliseconds: UInt64) {
        loop.schedule(after: milliseconds) { [weak self] in
            guard let self else { return }
            self.asking = false
            self.question = nil
            if self.askAgain {
                self.askAgain = false
                self.ask()
            }
        }
    }

    private func take(_ address: RedisAddress, from sentinel: RedisAddress) {
        let before = master.current?.address
        master.set(address, now: EventLoop.nowMilliseconds())
        if let before, before != address {
            faults.note("fleet: master \(settings.masterName) moved from \(before) to \(address) (sentinel \(sentinel))")
        }
    }

    // MARK: the announcements

    private func subscribe() {
        guard !stopped else { return }
        let sentinel = settings.sentinels[subscribedTo % settings.sentinels.count]
        connection(to: sentinel) { [weak self] connection in
            guard let self else { return }
            self.subscriber = connection
            connection.onReady = { [weak self, weak connection] in
                guard let self, let connection else { return }
                connection.subscribe(Sentinel.switchChannel, subscribed: { [weak self] in
                    self?.backoff.reset()
                    self?.ask()  // a failover may have happened while not subscribed
                }, message: { [weak self] payload in
                    guard let self, let address = Sentinel.switched(payload, master: self.settings.masterName) else { return }
                    self.take(address, from: sentinel)
                })
            }
            connection.onClosed = { [weak self] _ in
                guard let self, !self.stopped else { return }
                self.subscriber = nil
                self.subscribedTo += 1
                self.loop.schedule(after: self.backoff.take()) { [weak self] in self?.subscribe() }
            }
        }
    }
}
