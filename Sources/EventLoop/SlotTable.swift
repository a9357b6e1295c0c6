/// Values addressed by tokens: the slot index in the low 32 bits and the
/// slot's generation in the high 32. Insert, lookup and removal index an
/// array (no hashing: the loop looks a handler up for every event); a token
/// whose value was removed finds nothing, even once its slot is reused.
/// Tokens are never 0 (generations start at 1) nor all ones.
struct SlotTable<Value> {
    private var values: [Value?] = []
    private var generations: [UInt32] = []
    private var free: [UInt32] = []

    var count: Int { values.count - free.count }

    mutating func insert(_ value: Value) -> UInt64 {
        let slot: Int
        if let reused = free.popLast() {
            slot = Int(reused)
        } else {
            slot = values.count
            values.append(nil)
            generations.append(1)
        }
        values[slot] = value
        return UInt64(generations[slot]) << 32 | UInt64(slot)
    }

    private func slot(of token: UInt64) -> Int? {
        let slot = Int(token & 0xFFFF_FFFF)
        guard slot < values.count, generations[slot] == UInt32(truncatingIfNeeded: token >> 32), values[slot] != nil else { return nil }
        return slot
    }

    subscript(token: UInt64) -> Value? { slot(of: token).flatMap { values[$0] } }

    /// Replaces the value of a live token; false if it is not live.
    @discardableResult
    mutating func replace(_ token: UInt64, with value: Value) -> Bool {
        guard let slot = slot(of: token) else { return false }
        values[slot] = value
        return true
    }

    @discardableResult
    mutating func remove(_ token: UInt64) -> Value? {
        guard let slot = slot(of: token) else { return nil }
        let value = values[slot]
        values[slot] = nil
        // Generation 0 would make token 0 possible; all ones is the C wake token.
        generations[slot] = generations[slot] >= 0x7FFF_FFFF ? 1 : generations[slot] + 1
        free.append(UInt32(slot))
        return value
    }
}
