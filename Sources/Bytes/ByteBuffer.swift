#if canImport(Glibc)
import Glibc
#endif

/// Bytes written through a pointer: room is made once per line
/// (`reserve`), then each piece is a store or a memcpy, with none of an
/// array's per-append uniqueness and capacity checks. Used by the access
/// log and the log's followers, where a line is some twenty pieces.
public final class ByteBuffer {
    public private(set) var base: UnsafeMutablePointer<UInt8>
    public private(set) var count = 0
    private var capacity: Int

    public init(capacity: Int = 4096) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    public var isEmpty: Bool { count == 0 }
    public var bytes: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: base, count: count) }

    /// Where the next byte goes, with room for `n` bytes from there.
    @inline(__always)
    public func end(reserving n: Int) -> UnsafeMutablePointer<UInt8> {
        if count + n > capacity { grow(to: count + n) }
        return base + count
    }

    /// Counts the bytes written from `end(reserving:)` up to `cursor`.
    @inline(__always)
    public func commit(upTo cursor: UnsafeMutablePointer<UInt8>) { count = cursor - base }

    public func append(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        let to = end(reserving: bytes.count)
        memcpy(to, bytes.baseAddress!, bytes.count)
        count += bytes.count
    }

    public func append<S: Sequence<UInt8>>(contentsOf bytes: S) {
        for byte in bytes {
            end(reserving: 1).pointee = byte
            count += 1
        }
    }

    public func removeAll() { count = 0 }

    /// Gives back memory beyond `capacity` (a buffer that grew for a burst).
    public func shrink(to capacity: Int) {
        guard self.capacity > capacity, count <= capacity else { return }
        let smaller = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        smaller.update(from: base, count: count)
        base.deallocate()
        (base, self.capacity) = (smaller, capacity)
    }

    private func grow(to needed: Int) {
        var size = capacity * 2
        while size < needed { size *= 2 }
        let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: size)
        larger.update(from: base, count: count)
        base.deallocate()
        (base, capacity) = (larger, size)
    }
}
