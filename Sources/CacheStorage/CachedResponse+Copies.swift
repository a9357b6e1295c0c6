import CEventLoop

/// What the memory tier and workers' copies read of an entry's links word
/// without its lock or a reference: the list walked by address (SIEVE's
/// admission), the `retired` flag, and workers' private copies
/// (`LocalHits`).
extension CachedResponse {
    /// The block's address, and the list read by address: for walks over
    /// the memory tier's list (under its lock) that take no references.
    var address: UnsafeRawPointer { UnsafeRawPointer(Unmanaged.passUnretained(storage).toOpaque()) }

    static func linkWord(at address: UnsafeRawPointer) -> UInt {
        Unmanaged<Storage>.fromOpaque(address)._withUnsafeGuaranteedRef { storage in
            el_load_word(storage.withUnsafeMutablePointerToElements { UnsafeRawPointer($0) })
        }
    }

    static func newer(at address: UnsafeRawPointer) -> UnsafeRawPointer? {
        UnsafeRawPointer(bitPattern: linkWord(at: address) & ~flagBits)
    }

    static func entry(at address: UnsafeRawPointer) -> CachedResponse {
        CachedResponse(storage: Unmanaged<Storage>.fromOpaque(address).takeUnretainedValue())
    }

    /// The entry left the memory tier's index (evicted, replaced, removed,
    /// purged, or its key's variants changed): a worker's copy of it is no
    /// longer served. Set once, never cleared.
    var retired: Bool {
        get { linkWord & 4 != 0 }
        nonmutating set { setLinkBit(4, newValue) }
    }

    /// A worker's private copy (`LocalHits`): the same response in a block
    /// of its own, so that its hits count references on nothing another
    /// thread touches. It holds the tier's entry it copies (`original`).
    var isLocalCopy: Bool { linkWord & 8 != 0 }

    /// The tier's entry a local copy was made of.
    var original: CachedResponse? { isLocalCopy ? olderVariants.first : nil }

    /// For a local copy: whether it may answer, its original being still
    /// the tier's and used since SIEVE's hand last passed (else the hit
    /// goes through the tier, which marks it). Read through the original's
    /// address kept in the copy's second link word: no reference counted.
    var mayAnswerAsCopy: Bool {
        guard let raw = (links + 8).load(as: UnsafeRawPointer?.self) else { return false }
        return Unmanaged<Storage>.fromOpaque(raw)._withUnsafeGuaranteedRef { original in
            el_load_word(original.withUnsafeMutablePointerToElements { UnsafeRawPointer($0) }) & 5 == 1
        }
    }

    /// This entry as the memory tier's index may take it as a key's head:
    /// itself, or a copy when it was retired or is a worker's copy.
    var forIndex: CachedResponse { linkWord & 12 == 0 ? self : copied() }

    /// The same response in a new block with no links or flags (`local`:
    /// a worker's copy holding this entry).
    func copied(local: Bool = false) -> CachedResponse {
        let tail = Int(storage.header.keyLength) + headLength + storage.header.bodyCount
        let header = storage.header
        let copy = unsafeDowncast(Storage.create(minimumCapacity: Self.linkBytes + tail) { _ in header }, to: Storage.self)
        let from = UnsafeRawPointer(links)
        copy.withUnsafeMutablePointerToElements { start in
            let to = UnsafeMutableRawPointer(start)
            to.storeBytes(of: local ? 8 : 0, as: UInt.self)
            to.storeBytes(of: local ? UnsafeRawPointer(Unmanaged.passUnretained(storage).toOpaque()) : nil, toByteOffset: 8,
                          as: UnsafeRawPointer?.self)
            (to + 16).bindMemory(to: [CachedResponse].self, capacity: 1).initialize(to: local ? [self] : [])
            if tail > 0 { (to + Self.linkBytes).copyMemory(from: from + Self.linkBytes, byteCount: tail) }
        }
        return CachedResponse(storage: copy)
    }
}
