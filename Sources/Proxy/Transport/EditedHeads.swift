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
/// copies the kept result straight into the client's output.
final class EditedHeads {
    private static let slots = 64
    /// Larger heads are filtered on every hit (a slot's memory is bounded).
    static let largest = 2048
    private var generations = [UInt64](repeating: 0, count: slots)
    /// Each slot's stored head, then its result, in one allocation (plain
    /// memory: a hit reads it without reference counting).
    private var kept = [UnsafeMutableRawBufferPointer](repeating: UnsafeMutableRawBufferPointer(start: nil, count: 0), count: slots)
    private var originalCounts = [Int](repeating: 0, count: slots)

    deinit { for slot in kept { slot.deallocate() } }

    /// The head without the fields `drops` names, then the rules' literal
    /// `lines`: the kept bytes, valid until the next call. Nil for a head
    /// over `largest` (`append` it).
    func edited(_ head: UnsafeRawBufferPointer, drops: FieldNames, lines: UnsafeRawBufferPointer,
                generation: UInt64) -> UnsafeRawBufferPointer? {
        guard head.count <= Self.largest, let base = head.baseAddress else { return nil }
        let slot = (Int(bitPattern: base) >> 7) & (Self.slots - 1)
        let original = originalCounts[slot], bytes = kept[slot]
        if generations[slot] == generation, original == head.count, memcmp(bytes.baseAddress!, base, original) == 0 {
            return UnsafeRawBufferPointer(rebasing: bytes[original...])
        }
        var result: [UInt8] = []
        Self.append(head, drops: drops, lines: lines, to: &result)
        bytes.deallocate()
        let fresh = UnsafeMutableRawBufferPointer.allocate(byteCount: head.count + result.count, alignment: 1)
        fresh.copyMemory(from: head)
        result.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: fresh[head.count...]).copyMemory(from: $0) }
        (kept[slot], originalCounts[slot], generations[slot]) = (fresh, head.count, generation)
        return UnsafeRawBufferPointer(rebasing: fresh[head.count...])
    }

    /// The same result appended to `out`, computed afresh.
    static func append(_ head: UnsafeRawBufferPointer, drops: FieldNames, lines: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.reserveCapacity(out.count + head.count + lines.count)
        drops.appendHead(head, to: &out)
        out.append(contentsOf: lines)
    }
}
