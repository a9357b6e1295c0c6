import EdgeControls
#if canImport(Glibc)
import Glibc
#endif

/// A worker's stored heads as response rules leave them: filtering a head
/// on every hit of a hot key cost a hit about a tenth more, so each result
/// is kept, keyed by the rules and the stored head's bytes themselves (the
/// result is a function of both alone: no entry is held, or trusted by its
/// address, which a freed block's successor could share). A slot is
/// chosen by the block's address; a hit compares the head's bytes once and
/// queues the kept result by reference.
final class EditedHeads {
    private static let slots = 64
    /// Larger heads are filtered on every hit (a slot's memory is bounded).
    static let largest = 2048
    private var generations = [UInt64](repeating: 0, count: slots)
    private var originals = [[UInt8]](repeating: [], count: slots)
    private var edited = [[UInt8]](repeating: [], count: slots)

    /// The head without the fields `drops` names, appended to `out` (one
    /// copy: queued by reference instead, as a block of its own, it cost more).
    func append(_ head: UnsafeRawBufferPointer, drops: FieldNames, generation: UInt64, to out: inout [UInt8]) {
        guard head.count <= Self.largest, let base = head.baseAddress else { return drops.appendHead(head, to: &out) }
        let slot = (Int(bitPattern: base) >> 7) & (Self.slots - 1)
        let same = generations[slot] == generation && originals[slot].withUnsafeBytes { kept in
            kept.count == head.count && memcmp(kept.baseAddress!, base, head.count) == 0
        }
        if same { return edited[slot].withUnsafeBytes { out.append(contentsOf: $0) } }
        var result: [UInt8] = []
        result.reserveCapacity(head.count)
        drops.appendHead(head, to: &result)
        generations[slot] = generation
        originals[slot] = Array(head)
        edited[slot] = result
        out.append(contentsOf: result)
    }
}
