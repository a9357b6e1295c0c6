// libFuzzer target: the disk tier's file decoder (Sources/CacheStorage).
// Any bytes on disk (torn writes, corruption, another program's files)
// must decode to a record or a clean failure; a record re-encodes to the
// same bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func diskRecordFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let record = try? DiskFormat.decode(bytes) {
        precondition(try! DiskFormat.decode(DiskFormat.encode(record)) == record)
        // A disk hit's decoder agrees with the record's own response.
        let hit = try! DiskFormat.decodeEntry(bytes, key: record.key, verify: true)!
        precondition(hit.storedAt == record.storedAt && hit.entry.storedHead == record.response.storedHead)
    }
    // Unverified (a file checked once, then changed underneath): a clean
    // failure or a response, never a crash.
    _ = try? DiskFormat.decodeEntry(bytes, key: "/", verify: false)
    if size > DiskFormat.fixedHeaderBytes {
        _ = try? DiskFormat.decodeMeta(bytes[DiskFormat.fixedHeaderBytes...])
    }
    return 0
}
