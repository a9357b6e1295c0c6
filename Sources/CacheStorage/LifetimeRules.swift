import Synchronization

/// A tier's current `TierLifetimes`, an immutable snapshot read on every
/// hit without a lock or a reference count: readers load a pointer, and a
/// reload swaps in a new snapshot. The ones replaced are kept until the
/// tier goes (a reader may still be in one; a reload leaves a few KiB).
public final class LifetimeRules: Sendable {
    private final class Snapshot: Sendable {
        let rules: any TierLifetimes
        init(_ rules: any TierLifetimes) { self.rules = rules }
    }
    private let current = Atomic<UInt>(0)
    private let kept = Mutex<[Snapshot]>([])

    public init() {}

    public func set(_ rules: (any TierLifetimes)?) {
        guard let rules else { return current.store(0, ordering: .releasing) }
        let snapshot = Snapshot(rules)
        kept.withLock { $0.append(snapshot) }
        current.store(UInt(bitPattern: Unmanaged.passUnretained(snapshot).toOpaque()), ordering: .releasing)
    }

    /// Whether any are set (a hit without routes' lifetimes asks nothing more).
    @inline(__always)
    public var isEmpty: Bool { current.load(ordering: .relaxed) == 0 }

    /// Which snapshot is current (0: none): what a worker's copy of an
    /// answer computed with them remembers, to know it still holds.
    @inline(__always)
    var generation: UInt { current.load(ordering: .acquiring) }

    @inline(__always)
    public func memoryLifetime(_ key: String) -> Int?? {
        let raw = current.load(ordering: .acquiring)
        guard raw != 0 else { return nil }
        return Unmanaged<Snapshot>.fromOpaque(UnsafeRawPointer(bitPattern: raw)!)._withUnsafeGuaranteedRef { $0.rules.memoryLifetime(key) }
    }

    @inline(__always)
    public func diskLifetime(_ key: String) -> Int?? {
        let raw = current.load(ordering: .acquiring)
        guard raw != 0 else { return nil }
        return Unmanaged<Snapshot>.fromOpaque(UnsafeRawPointer(bitPattern: raw)!)._withUnsafeGuaranteedRef { $0.rules.diskLifetime(key) }
    }
}
