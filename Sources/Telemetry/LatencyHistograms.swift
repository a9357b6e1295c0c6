import Synchronization

/// One worker's latency histograms (`WorkerStats.latency`): bucket counts
/// that only its thread writes (a relaxed load and store, as the
/// counters), summed over the workers when `/metrics` is read
/// (`ProxyStats.latency`). A request records one bucket and a sum per
/// series: no lock, no allocation, no line shared with another core.
public final class LatencyHistograms: @unchecked Sendable {
    /// Bucket upper bounds in microseconds (`le`, shown in seconds).
    public static let boundsMicroseconds: [Int] = [100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000,
                                                   250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000]

    /// What is timed: a client's answer to its first byte queued and to its
    /// last, by how it was answered, and the upstream's time to its head.
    public enum Series: Int, CaseIterable, Sendable {
        case firstByteHit, firstByteMiss, firstBytePass, firstByteOther
        case totalHit, totalMiss, totalPass, totalOther
        case upstreamHead
        /// One turn of the worker's event loop: its events and the work they
        /// deferred (a long one kept every other connection of the worker waiting).
        case loopTurn
    }

    /// How an answer was made, the `result` label.
    public enum Result: Int, CaseIterable, Sendable {
        case hit, miss, pass, other
        public var label: String { text.description }
        /// The label as static bytes (the access log writes it without a String).
        public var text: StaticString {
            switch self {
            case .hit: "hit"
            case .miss: "miss"
            case .pass: "pass"
            case .other: "other"
            }
        }
        public init?(label: String) {
            guard let result = Self.allCases.first(where: { $0.label == label }) else { return nil }
            self = result
        }
    }

    /// Per series: a count per bound, one beyond the last, the sum of
    /// microseconds (a literal: a static array's count is read through a
    /// lazy global on every use).
    public static let stride = 18
    private let cells = CounterCells(count: Series.allCases.count * LatencyHistograms.stride)

    public init() {}

    deinit { cells.free() }

    /// Adds one observation; called only on the owning worker's thread.
    @inline(__always)
    public func record(_ series: Series, microseconds: Int) {
        let bucket = Self.bucket(microseconds)
        let base = series.rawValue * Self.stride
        cells.add(base + bucket, 1)
        cells.add(base + Self.stride - 1, max(0, microseconds))
    }

    /// The bucket of an observation: the first bound that holds it, by
    /// comparisons with constants (no array on the hot path); 16 beyond
    /// them all. Agrees with `boundsMicroseconds` (tested).
    @inline(__always)
    public static func bucket(_ us: Int) -> Int {
        if us <= 1_000 { return us <= 100 ? 0 : us <= 250 ? 1 : us <= 500 ? 2 : 3 }
        if us <= 100_000 { return us <= 2_500 ? 4 : us <= 5_000 ? 5 : us <= 10_000 ? 6 : us <= 25_000 ? 7 : us <= 50_000 ? 8 : 9 }
        return us <= 250_000 ? 10 : us <= 500_000 ? 11 : us <= 1_000_000 ? 12 : us <= 2_500_000 ? 13
            : us <= 5_000_000 ? 14 : us <= 10_000_000 ? 15 : 16
    }

    /// An answer's two observations (one bucket search when, as for a hit
    /// queued whole, they are the same).
    @inline(__always)
    public func record(_ result: Result, firstByte: Int, total: Int) {
        let firstBucket = Self.bucket(firstByte)
        let totalBucket = total == firstByte ? firstBucket : Self.bucket(total)
        let first = Series.firstByte(result).rawValue * Self.stride, whole = Series.total(result).rawValue * Self.stride
        cells.add(first + firstBucket, 1)
        cells.add(first + Self.stride - 1, max(0, firstByte))
        cells.add(whole + totalBucket, 1)
        cells.add(whole + Self.stride - 1, max(0, total))
    }

    /// One series as read now.
    public struct Snapshot: Equatable, Sendable {
        /// Observations per bucket (not cumulative), the last beyond every bound.
        public var buckets: [Int]
        public var sumMicroseconds: Int
        public var count: Int { buckets.reduce(0, +) }

        public init(buckets: [Int], sumMicroseconds: Int) {
            self.buckets = buckets
            self.sumMicroseconds = sumMicroseconds
        }

        static var empty: Snapshot { Snapshot(buckets: Array(repeating: 0, count: boundsMicroseconds.count + 1), sumMicroseconds: 0) }

        mutating func add(_ other: Snapshot) {
            for i in buckets.indices { buckets[i] += other.buckets[i] }
            sumMicroseconds += other.sumMicroseconds
        }
    }

    public func snapshot(_ series: Series) -> Snapshot {
        let base = series.rawValue * Self.stride
        return Snapshot(buckets: (0..<Self.stride - 1).map { cells.value(base + $0) },
                        sumMicroseconds: cells.value(base + Self.stride - 1))
    }
}

extension LatencyHistograms.Series {
    public static func firstByte(_ result: LatencyHistograms.Result) -> Self { Self(rawValue: result.rawValue)! }
    public static func total(_ result: LatencyHistograms.Result) -> Self { Self(rawValue: 4 + result.rawValue)! }
}

/// Counters in one allocation that one thread writes (a relaxed load and
/// store, no locked read-modify-write) and any thread reads; its owner
/// frees it.
public struct CounterCells {
    private let base: UnsafeMutablePointer<Atomic<Int>>
    private let count: Int

    public init(count: Int) {
        self.count = count
        base = .allocate(capacity: count)
        for i in 0..<count { (base + i).initialize(to: Atomic(0)) }
    }

    public func free() {
        base.deinitialize(count: count)
        base.deallocate()
    }

    @inline(__always)
    public func add(_ index: Int, _ n: Int) {
        let cell = base + index
        cell.pointee.store(cell.pointee.load(ordering: .relaxed) &+ n, ordering: .relaxed)
    }

    public func value(_ index: Int) -> Int { base[index].load(ordering: .relaxed) }
}
