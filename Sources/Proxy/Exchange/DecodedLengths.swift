import CacheStorage
import Compression
import Threads

/// The decoded sizes of stored bodies whose coding does not declare one (a
/// brotli stream never does; a zstd frame may not): measured once by
/// decoding the whole on an I/O thread (`DecodingStart` off the loop), so
/// every later client that needs it decoded gets a Content-Length at once.
/// A body that decodes to more than `limit` is not measured further (a
/// "bomb": its clients get the upstream's identity copy instead). One per
/// process, bounded (forgotten when full), as `UndecodableBodies`.
final class DecodedLengths: Sendable {
    static let shared = DecodedLengths()
    static let capacity = 4096
    private let known = Locked([String: Int?]())

    /// At most 64 times the stored size, at least 16 MiB, at most 1 GiB.
    static func limit(compressed: Int) -> Int { min(max(compressed &* 64, 16 << 20), 1 << 30) }

    /// nil: not measured yet; .some(nil): measured, not decodable within the limit.
    func length(of entry: CachedResponse) -> Int?? {
        let identity = UndecodableBodies.identity(entry)
        return known.withLock { $0[identity] }
    }

    /// Decodes the whole (reading may wait: never on a worker's loop) and
    /// remembers what it came to.
    func measure(_ entry: CachedResponse, reading reader: StoredBodyReader) -> Int? {
        let length = Self.decodedLength(entry, reading: reader)
        let identity = UndecodableBodies.identity(entry)
        known.withLock {
            if $0.count >= Self.capacity { $0.removeAll(keepingCapacity: true) }
            $0[identity] = .some(length)
        }
        return length
    }

    static func decodedLength(_ entry: CachedResponse, reading reader: StoredBodyReader) -> Int? {
        guard let codec = Codec(rawValue: entry.coding.rawValue), let decoder = codec.decoder() else { return nil }
        let limit = limit(compressed: reader.count)
        let input = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        let output = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        defer { input.deallocate(); output.deallocate() }
        var position = 0, filled = 0..<0, total = 0
        while !decoder.finished {
            var piece: UnsafeRawBufferPointer
            if let inPlace = reader.inPlace(from: position) {
                piece = inPlace
            } else {
                if filled.isEmpty && position < reader.count {
                    guard let n = reader.read(from: position, into: input), n > 0 else { return nil }
                    filled = 0..<n
                }
                piece = UnsafeRawBufferPointer(rebasing: input[filled])
            }
            guard let (consumed, produced) = try? decoder.decode(piece, into: output, isLast: position + piece.count == reader.count)
            else { return nil }
            if consumed == 0 && produced == 0 && !decoder.finished { return nil }
            position += consumed
            if !filled.isEmpty { filled = (filled.lowerBound + consumed)..<filled.upperBound }
            total += produced
            if total > limit { return nil }
        }
        return total
    }
}
