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

    private let storage: Storage

    public init(_ source: UnsafeRawBufferPointer) {
        storage = unsafeDowncast(Storage.create(minimumCapacity: source.count) { _ in source.count }, to: Storage.self)
        if source.count > 0 {
            storage.withUnsafeMutablePointerToElements { $0.update(from: source.bindMemory(to: UInt8.self).baseAddress!, count: source.count) }
        }
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
