// libFuzzer target: the disk tier's file decoder (Sources/CacheStorage).
// Any bytes on disk (torn writes, corruption, another program's files)
// must decode to a record or a clean failure; a record re-encodes to the
// same bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func diskRecordFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let record = try? DiskFormat.decode(bytes) {
        precondition(try! DiskFormat.decode(DiskFormat.encode(record)) == record)
    }
    if size > DiskFormat.fixedHeaderBytes {
        _ = try? DiskFormat.decodeMeta(bytes[DiskFormat.fixedHeaderBytes...])
    }
    return 0
}
