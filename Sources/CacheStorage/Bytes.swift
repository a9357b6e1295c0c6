#if canImport(Glibc)
import Glibc
#endif

/// An immutable block of bytes at a stable address, so that `writev` can
/// point straight into stored responses without copying them per hit.
public final class Bytes: @unchecked Sendable {
    public let pointer: UnsafeRawPointer
    public let count: Int

    public init(_ source: UnsafeRawBufferPointer) {
        let storage = UnsafeMutableRawPointer.allocate(byteCount: max(source.count, 1), alignment: 16)
        if source.count > 0 { storage.copyMemory(from: source.baseAddress!, byteCount: source.count) }
        pointer = UnsafeRawPointer(storage)
        count = source.count
    }

    public convenience init(_ array: [UInt8]) {
        self.init(array.withUnsafeBytes { UnsafeRawBufferPointer($0) })
    }

    /// Takes ownership of memory allocated with `UnsafeMutableRawPointer.allocate`.
    public init(adopting storage: UnsafeMutableRawPointer, count: Int) {
        pointer = UnsafeRawPointer(storage)
        self.count = count
    }

    deinit { UnsafeMutableRawPointer(mutating: pointer).deallocate() }

    public var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: pointer, count: count) }
}

/// A growable byte accumulator that hands its memory over to `Bytes` without
/// a final copy; used to collect a response body while it streams through.
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

    /// Moves the bytes into an immutable `Bytes`; the accumulator is empty
    /// after. Spare capacity is given back first: a stored body costs its
    /// size, not the 4 KiB minimum or the doubling slack of its growth.
    public mutating func take() -> Bytes {
        defer { storage = nil; capacity = 0; count = 0 }
        guard var storage else { return Bytes([]) }
        if capacity - count > 64, count > 0, let shrunk = realloc(storage, count) {
            // `allocate` with 16-byte alignment is malloc on Linux, so
            // realloc is its companion (and `deallocate` frees it).
            storage = shrunk
        }
        return Bytes(adopting: storage, count: count)
    }

    /// Frees the memory (when a body turns out too large to store).
    public mutating func discard() {
        storage?.deallocate()
        storage = nil
        capacity = 0
        count = 0
    }
}
