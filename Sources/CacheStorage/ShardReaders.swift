import CEventLoop
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// Lets the memory tier's hits read a shard without taking its mutex, so a
/// hit writes nothing another core reads (a mutex is a word every locker
/// writes: with two workers each hit moved it between cores, and a waiter
/// slept in the kernel). A big-reader lock: each worker owns a slot on a
/// cache line of its own and, for the few nanoseconds of a lookup, writes
/// there which shard it reads; a writer (a store, a removal, a purge) takes
/// the shard's mutex, raises the shard's flag and waits until no slot names
/// the shard. A reader that finds the flag raised steps back and takes the
/// mutex. Lookups stay exact: a reader sees the shard before or after a
/// change, never during one.
///
/// Slots are process-wide (a worker reads every tier's shards through the
/// same one); a thread without one (more than `capacity` at once) takes
/// the mutex on every lookup, as before.
public final class ShardReader {
    /// This reader's slot (its own cache line).
    let word: UnsafeMutableRawPointer
    /// The epoch its worker announced for the period under way, 0 between
    /// periods (`Reclamation`), beside the slot on the same line.
    var epochWord: UnsafeMutableRawPointer { word + MemoryLayout<UInt>.size }
    private let index: Int

    /// Nil when every slot is taken.
    public init?() {
        guard let index = ShardReaders.claim() else { return nil }
        self.index = index
        word = ShardReaders.slot(index)
    }

    deinit { ShardReaders.release(index) }
}

enum ShardReaders {
    static let capacity = 256
    /// Two cache lines per slot: adjacent-line prefetch pairs lines.
    static let stride = 128
    nonisolated(unsafe) private static let words: UnsafeMutableRawPointer = {
        let words = UnsafeMutableRawPointer.allocate(byteCount: capacity * stride, alignment: stride)
        words.initializeMemory(as: UInt8.self, repeating: 0, count: capacity * stride)
        return words
    }()
    private static let taken = Locked<[Bool]>([Bool](repeating: false, count: capacity))
    /// Slots ever claimed are below this: writers look at no more.
    private static let inUse = Atomic<Int>(0)

    static func slot(_ index: Int) -> UnsafeMutableRawPointer { words + index * stride }

    static func claim() -> Int? {
        taken.withLock { taken in
            guard let free = taken.firstIndex(of: false) else { return nil }
            taken[free] = true
            if free >= inUse.load(ordering: .relaxed) { inUse.store(free + 1, ordering: .sequentiallyConsistent) }
            return free
        }
    }

    static func release(_ index: Int) {
        el_store_word_seq(slot(index) + MemoryLayout<UInt>.size, 0)
        el_store_word_seq(slot(index), 0)
        taken.withLock { $0[index] = false }
    }

    /// The oldest epoch a reader announced (`UInt64.max`: none).
    static func oldestAnnounced() -> UInt64 {
        var oldest = UInt64.max
        for index in 0..<inUse.load(ordering: .sequentiallyConsistent) {
            let announced = UInt64(el_load_word_seq(slot(index) + MemoryLayout<UInt>.size))
            if announced != 0, announced < oldest { oldest = announced }
        }
        return oldest
    }

    /// Waits until no reader is inside `shard` (its address). Called with
    /// the shard's flag raised: readers arriving now step back, and one
    /// inside leaves within a lookup (or, if descheduled, when it runs again).
    static func waitOut(_ shard: UInt) {
        let count = inUse.load(ordering: .acquiring)
        for index in 0..<count {
            let word = slot(index)
            var spins = 0
            while el_load_word_seq(word) == shard {
                spins += 1
                if spins >= 64 { sched_yield() }
            }
        }
    }
}
