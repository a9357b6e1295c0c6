/// One key's files in the disk index, by name: nearly always one (a key
/// whose responses vary has one per variant). The first sits inline in the
/// index's shard, so a hit reads it without a second table (one dependent
/// cache miss less under the shard's lock) and a key costs no allocation of
/// its own; the others, when there are any, in a dictionary.
struct KeyFiles: Sequence {
    typealias Item = DiskIndex.Item
    typealias Element = (name: FileName, item: Item)

    /// The inline file (name and item in separate fields: a change to the
    /// item while its name is read is then no overlapping access, and no copy).
    private var firstName = FileName(key: 0, variant: 0)
    /// nil only when `others` is empty too.
    private var firstItem: Item?
    private var others: [FileName: Item] = [:]

    init() {}

    var isEmpty: Bool { firstItem == nil }
    var isSingle: Bool { firstItem != nil && others.isEmpty }
    var count: Int { firstItem == nil ? 0 : 1 + others.count }
    var names: [FileName] { map(\.name) }

    subscript(name: FileName) -> Item? {
        get {
            if firstName == name, let item = firstItem { return item }
            return others.isEmpty ? nil : others[name]
        }
        set {
            if let item = newValue { updateValue(item, forKey: name) } else { removeValue(forKey: name) }
        }
    }

    /// Changes the item under `name` in place, when there is one.
    mutating func modify(_ name: FileName, _ change: (inout Item) -> Void) {
        if firstItem != nil && firstName == name { change(&firstItem!) } else if others[name] != nil { change(&others[name]!) }
    }

    /// Stores `item` under `name`; returns the one it replaced.
    @discardableResult
    mutating func updateValue(_ item: Item, forKey name: FileName) -> Item? {
        guard firstItem != nil else {
            firstName = name
            firstItem = item
            return nil
        }
        if firstName == name {
            defer { firstItem = item }
            return firstItem
        }
        return others.updateValue(item, forKey: name)
    }

    /// Removes the item under `name`; returns it.
    @discardableResult
    mutating func removeValue(forKey name: FileName) -> Item? {
        guard firstItem != nil else { return nil }
        guard firstName == name else { return others.removeValue(forKey: name) }
        let removed = firstItem
        // Another variant takes the inline place.
        if let next = others.first {
            others.removeValue(forKey: next.key)
            firstName = next.key
            firstItem = next.value
        } else {
            firstName = FileName(key: 0, variant: 0)
            firstItem = nil
        }
        return removed
    }

    /// Calls `change` on every item in place, with its name (a hit noting
    /// its use: no copy of the table).
    mutating func forEachInPlace(_ change: (FileName, inout Item) -> Void) {
        guard firstItem != nil else { return }
        change(firstName, &firstItem!)
        guard !others.isEmpty else { return }
        var position = others.startIndex
        while position != others.endIndex {
            let name = others.keys[position]
            change(name, &others.values[position])
            others.formIndex(after: &position)
        }
    }

    func makeIterator() -> Iterator { Iterator(first: firstItem.map { (firstName, $0) }, others: others.makeIterator()) }

    struct Iterator: IteratorProtocol {
        var first: Element?
        var others: Dictionary<FileName, Item>.Iterator

        mutating func next() -> Element? {
            if let element = first {
                first = nil
                return element
            }
            return others.next().map { ($0.key, $0.value) }
        }
    }
}
