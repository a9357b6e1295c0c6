// libFuzzer target: the disk tier's file decoders (Sources/CacheStorage):
// records and sub-directories' name snapshots. Any bytes on disk (torn
// writes, corruption, another program's files) must decode to a record or
// a clean failure; a record re-encodes to the same bytes.
import CacheSemantics

@_cdecl("LLVMFuzzerTestOneInput")
public func diskRecordFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let record = try? DiskFormat.decode(bytes) {
        precondition(try! DiskFormat.decode(DiskFormat.encode(record)) == record)
        // A disk hit's decoder agrees with the record's own response.
        let hit = try! DiskFormat.decodeEntry(bytes, key: record.key, verify: true)!
        precondition(hit.storedAt == record.storedAt && hit.entry.storedHead == record.response.storedHead)
        // Its head made to say a joined piece (the writer's join), or the
        // whole, whatever else the head holds; a piece only what its body holds.
        let piece = PartialContent.Piece(first: 0, last: 9, length: 20)
        precondition(record.head.holding(piece).headPrefix.withUnsafeBytes { HeadFields.first("content-range", in: $0) }
                     == piece.contentRange)
        let whole = record.head.holding(PartialContent.Piece(first: 0, last: 19, length: 20))
        precondition(whole.status == 200 && whole.headPrefix.withUnsafeBytes { HeadFields.first("content-range", in: $0) } == nil)
        if let held = hit.entry.storedPiece { precondition(held.count == hit.entry.bodyLength) }
    }
    // Unverified (a file checked once, then changed underneath): a clean
    // failure or a response, never a crash. Whatever decodes, from disk or
    // from Redis (shifted by the fleet's clock), has a freshness and an age
    // at any clock reading, never an overflow trap.
    for shift: Int64 in [0, Int64.min, Int64.max] {
        guard let (_, entry) = try? DiskFormat.decodeEntry(bytes, key: "/", verify: false, shiftSeconds: shift) else { continue }
        for now: Int64 in [Int64.min, 0, 1_700_000_000, Int64.max] {
            let age = entry.currentAge(now: now)
            _ = entry.lifetime.minusSaturating(age)
            _ = Reuse.decide(lifetime: entry.lifetime, currentAge: age, request: CacheControl(), response: entry.cacheControl,
                                 requestPragmaNoCache: false)
        }
    }
    // The same bytes as a sub-directory's name snapshot (DIR/names/XX).
    if let snapshot = NameSnapshot(decoding: UnsafeRawBufferPointer(start: data, count: size)) {
        precondition(snapshot.encoded() == bytes)
    }
    if size > DiskFormat.fixedHeaderBytes {
        _ = try? DiskFormat.decodeMeta(bytes[DiskFormat.fixedHeaderBytes...])
    }
    return 0
}
