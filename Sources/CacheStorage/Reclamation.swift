import CEventLoop
import Synchronization
import Threads

/// When the memory tier may free what it took out of its index, so that a
/// worker's hit reads an entry without counting a reference on it (a count
/// is a write to a line that every worker reads: with two workers, half
/// the hits on 10,000 keys moved a line between cores).
///
/// Epochs with periods, as in quiescent-state reclamation. A worker's
/// lookups happen in periods (a loop turn): at a period's first lookup it
/// announces the global epoch in its `ShardReader` slot, and clears it when
/// the period ends. A node taken out of an index is tagged with the epoch
/// and raises it; it is freed once every announced epoch is past its tag,
/// that is, once every worker that could have read it ended its period.
///
/// What a hit returns holds the worker's `PeriodToken` instead of the
/// entry's block (`CachedResponse(borrowing:token:)`): a reference counted
/// on an object only that worker touches. A response still held when the
/// period ends (a slow client's bytes, a revalidation under way) keeps its
/// token alive; the token then lingers with the period's epoch, holding
/// back what was retired since, until the last such response goes: a
/// mistake costs memory for a while, never a freed block read. Holders
/// that keep a response long take an `owned()` one.
enum Reclamation {
    /// Raised by every retirement; a reader announces the value it saw.
    private static let epoch = Atomic<UInt64>(1)
    /// Nodes retired and not yet freed (read at each period's end).
    static let waiting = Atomic<Int>(0)
    /// (`Locked`, a pthread mutex: ThreadSanitizer follows it.)
    private static let limbo = Locked(Limbo())

    private struct Limbo: ~Copyable {
        /// Oldest first: tags only grow.
        var retired: [(tag: UInt64, node: Unmanaged<SieveNode>)] = []
        /// Tokens that outlived their period, with its epoch.
        var lingering: [ObjectIdentifier: UInt64] = [:]

        /// Takes out what no reader can hold any more.
        mutating func collect() -> ArraySlice<(tag: UInt64, node: Unmanaged<SieveNode>)> {
            guard !retired.isEmpty else { return [] }
            var oldest = ShardReaders.oldestAnnounced()
            for held in lingering.values where held < oldest { oldest = held }
            let n = retired.prefix { $0.tag < oldest }.count
            guard n > 0 else { return [] }
            let freed = retired[..<n]
            retired.removeFirst(n)
            Reclamation.waiting.store(retired.count, ordering: .relaxed)
            return freed
        }
    }

    /// `nodes`, taken out of an index (which gives up its reference to
    /// each), are released once no reader can be reading them.
    static func retire(_ nodes: [Unmanaged<SieveNode>]) {
        guard !nodes.isEmpty else { return }
        let freed = limbo.withLock { limbo in
            let tag = epoch.add(1, ordering: .sequentiallyConsistent).oldValue
            limbo.retired.append(contentsOf: nodes.map { (tag, $0) })
            waiting.store(limbo.retired.count, ordering: .relaxed)
            return limbo.collect()
        }
        for item in freed { item.node.release() }
    }

    static func retire(_ node: Unmanaged<SieveNode>) { retire([node]) }

    /// Frees what no reader holds any more (a period's end, when `waiting`).
    static func collect() {
        let freed = limbo.withLock { $0.collect() }
        for item in freed { item.node.release() }
    }

    /// Announces the epoch in `reader`'s slot before a period's first read
    /// (sequentially consistent: a retirement that raised the epoch after
    /// this load sees the announcement, or the read sees the node gone).
    static func announce(_ reader: ShardReader) -> UInt64 {
        let seen = epoch.load(ordering: .sequentiallyConsistent)
        el_store_word_seq(reader.epochWord, UInt(seen))
        return seen
    }

    /// The period ended: `reader` holds nothing from now on.
    static func withdraw(_ reader: ShardReader) { el_store_word(reader.epochWord, 0) }

    /// `token` outlived the period announced at `epoch` (registered before
    /// the period's announcement is withdrawn).
    static func linger(_ token: PeriodToken, epoch: UInt64) {
        token.lingers = true
        limbo.withLock { $0.lingering[ObjectIdentifier(token)] = epoch }
    }

    fileprivate static func ended(_ token: PeriodToken) {
        let freed = limbo.withLock { limbo in
            limbo.lingering[ObjectIdentifier(token)] = nil
            return limbo.collect()
        }
        for item in freed { item.node.release() }
    }

    /// Retired nodes not yet freed and tokens lingering (tests).
    static var pending: (retired: Int, lingering: Int) { limbo.withLock { ($0.retired.count, $0.lingering.count) } }
}

/// What a worker's hits in one period hold instead of their entries'
/// blocks (see `Reclamation`): retained and released by that worker's
/// requests alone.
final class PeriodToken {
    /// Outlived its period (set by its worker before anything else can see it).
    fileprivate(set) var lingers = false

    deinit { if lingers { Reclamation.ended(self) } }
}
