#if canImport(Glibc)
import Glibc
#endif

/// A buffer of each thread's own for a disk hit's read, kept between hits:
/// a file larger than the stack's temporary allocations (1 KiB) cost a
/// `malloc` and a `free` per hit (about 450 instructions, 2.7 % of a disk
/// hit). Freed with its thread. Reads larger than `maxBytes` get a buffer
/// of their own.
enum ReadScratch {
    static let maxBytes = 64 << 10

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { free($0) }
        return key
    }()

    /// Calls `body` with `count` bytes of scratch space (uninitialized).
    /// Not reentrant: `body` must not call it again.
    static func with<R>(count: Int, _ body: (UnsafeMutableRawBufferPointer) -> R) -> R {
        guard count <= maxBytes else {
            return withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { body($0) }
        }
        let key = self.key
        // The buffer starts with its capacity.
        var block = pthread_getspecific(key)
        if block == nil || block!.load(as: Int.self) < count {
            let capacity = max(count, 4096)
            guard let grown = realloc(block, MemoryLayout<Int>.size + capacity) else {
                return withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { body($0) }
            }
            grown.storeBytes(of: capacity, as: Int.self)
            pthread_setspecific(key, grown)
            block = grown
        }
        return body(UnsafeMutableRawBufferPointer(start: block! + MemoryLayout<Int>.size, count: count))
    }
}
