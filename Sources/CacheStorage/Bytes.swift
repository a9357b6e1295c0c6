#if canImport(Glibc)
import Glibc
#endif

/// An immutable block of bytes at a stable address, so that `writev` can
/// point straight into them (body pieces shared by collapsed requests,
/// response heads). One allocation: the bytes follow the object's header.
public struct Bytes: @unchecked Sendable {
    /// The standard library's tail-allocating class; the struct around it
    /// is what is Sendable (the bytes never change after `init`).
    private final class Storage: ManagedBuffer<Int, UInt8> {}

    private var storage: Storage

    public init(_ source: UnsafeRawBufferPointer) {
        storage = unsafeDowncast(Storage.create(minimumCapacity: source.count) { _ in source.count }, to: Storage.self)
        if source.count > 0 {
            storage.withUnsafeMutablePointerToElements { $0.update(from: source.bindMemory(to: UInt8.self).baseAddress!, count: source.count) }
        }
    }

    /// `count` bytes written in place by `fill`; nil when it returns false.
    public init?(count: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Bool) {
        storage = unsafeDowncast(Storage.create(minimumCapacity: count) { _ in count }, to: Storage.self)
        let filled = storage.withUnsafeMutablePointerToElements { fill(UnsafeMutableRawBufferPointer(start: $0, count: count)) }
        guard filled else { return nil }
    }

    /// The bytes to write again, when this value is the only one left that
    /// holds them (whoever it was handed to has let go): a block reused for
    /// what is copied into clients' output saves an allocation per hit.
    /// Nil while another holds them (they must not change under it).
    public mutating func reusableBuffer() -> UnsafeMutableRawBufferPointer? {
        guard isKnownUniquelyReferenced(&storage) else { return nil }
        return storage.withUnsafeMutablePointerToElements { UnsafeMutableRawBufferPointer(start: $0, count: storage.header) }
    }

    public init(_ array: [UInt8]) {
        self = array.withUnsafeBytes { Bytes($0) }
    }

    public var count: Int { storage.header }

    /// Valid as long as this value (or a copy) exists.
    public var pointer: UnsafeRawPointer { storage.withUnsafeMutablePointerToElements { UnsafeRawPointer($0) } }

    public var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: pointer, count: count) }
}

/// A growable byte accumulator: collects a response body while it streams
/// through (the stored entry copies it into its own block once complete).
public struct ByteAccumulator {
    private var storage: UnsafeMutableRawPointer?
    private var capacity = 0
    public private(set) var count = 0

    public init() {}

    /// Makes room for `total` bytes at once (a body whose length is known),
    /// so nothing is copied while it grows and nothing is wasted after.
    public mutating func reserve(_ total: Int) {
        guard total > capacity else { return }
        let grown = UnsafeMutableRawPointer.allocate(byteCount: total, alignment: 16)
        if let storage {
            grown.copyMemory(from: storage, byteCount: count)
            storage.deallocate()
        }
        storage = grown
        capacity = total
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        if count + bytes.count > capacity { reserve(max(capacity * 2, count + bytes.count, 4096)) }
        (storage! + count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        count += bytes.count
    }

    /// The bytes so far (valid until the next change).
    public var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: storage, count: count) }

    /// Frees the memory (when a body turns out too large to store).
    public mutating func discard() {
        storage?.deallocate()
        storage = nil
        capacity = 0
        count = 0
    }
}
