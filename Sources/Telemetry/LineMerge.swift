/// Access lines of several workers put in time order before they are
/// written: each worker hands its lines over in batches (within a second,
/// each batch in its own order), so a line may come up to that long after
/// a later line of another worker. Lines are held until `hold` has passed
/// since their time, then written in time order (a stable sort: one
/// worker's lines keep theirs). A value, used by the log's writer thread.
struct LineMerge {
    /// Whole lines and each one's time (wall milliseconds) and end offset.
    struct Batch {
        var bytes: [UInt8] = []
        var times: [Int64] = []
        var ends: [Int] = []

        var isEmpty: Bool { times.isEmpty }

        mutating func append(_ line: ArraySlice<UInt8>, time: Int64) {
            bytes += line
            times.append(time)
            ends.append(bytes.count)
        }

        func line(_ i: Int) -> ArraySlice<UInt8> { bytes[(i == 0 ? 0 : ends[i - 1])..<ends[i]] }
    }

    private var held: [Batch] = []

    var isEmpty: Bool { held.allSatisfy(\.isEmpty) }

    /// The earliest time held (nil: none).
    var earliest: Int64? { held.compactMap { $0.times.min() }.min() }

    mutating func add(_ batch: Batch) {
        if !batch.isEmpty { held.append(batch) }
    }

    /// The lines timed at or before `cutoff`, in time order, as one
    /// buffer; the later ones stay held.
    mutating func take(upTo cutoff: Int64) -> [UInt8] {
        var due: [(time: Int64, batch: Int, line: Int)] = []
        for (b, batch) in held.enumerated() {
            for (i, time) in batch.times.enumerated() where time <= cutoff { due.append((time, b, i)) }
        }
        guard !due.isEmpty else { return [] }
        // Stable: equal times keep their batch (arrival) and line order.
        due.sort { ($0.time, $0.batch, $0.line) < ($1.time, $1.batch, $1.line) }
        var out: [UInt8] = []
        out.reserveCapacity(held.reduce(0) { $0 + $1.bytes.count })
        for d in due { out += held[d.batch].line(d.line) }
        var kept = Batch()
        for batch in held {
            for (i, time) in batch.times.enumerated() where time > cutoff { kept.append(batch.line(i), time: time) }
        }
        held = kept.isEmpty ? [] : [kept]
        return out
    }
}
