#if canImport(Glibc)
import Glibc
#endif

/// Workers' private copies of stored responses (`LocalHits`).
extension CachedResponse {
    /// The same response in a block of its own, so that hits on it count
    /// references on nothing another thread touches.
    func copied() -> CachedResponse {
        let header = withStorage { $0.header }
        let count = Int(header.keyLength) + headLength + header.bodyCount
        let copy = unsafeDowncast(Storage.create(minimumCapacity: count) { _ in header }, to: Storage.self)
        let from = UnsafeRawPointer(tail)
        copy.withUnsafeMutablePointerToElements { start in
            if count > 0 { UnsafeMutableRawPointer(start).copyMemory(from: from, byteCount: count) }
        }
        return CachedResponse(storage: copy)
    }

    /// Whether `other` is a copy of this response (or this of it): the same
    /// timing, key, head, body length and Vary values, not necessarily the
    /// same block.
    func isCopy(of other: CachedResponse) -> Bool {
        timing == other.timing && headLength == other.headLength && bodyLength == other.bodyLength
            && keyBytes.count == other.keyBytes.count
            && memcmp(tail, other.tail, keyBytes.count + headLength) == 0 && varyValues == other.varyValues
    }
}
