import FoundationEssentials
import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// The writer thread: whole records and streamed bodies, written to a
/// temporary file and renamed into place; soft-purge flags set in place.
extension DiskTier {
    func writeLoop() {
        while true {
            let op = queue.pop()
            switch op {
            case .write(let record, let seq):
                write(record, seq: seq)
            case .streamOpen(let id, let record, let seq):
                streamOpen(id, record, seq: seq)
            case .streamAppend(let id, let bytes):
                streamAppend(id, bytes)
            case .streamFinish(let id):
                streamFinish(id)
            case .streamAbort(let id):
                if let s = streams.removeValue(forKey: id) {
                    DiskIO.close(s.fd)
                    try? DiskIO.remove(s.tmpPath)
                }
            case .unlink(let paths):
                for path in paths { try? DiskIO.remove(path) }
            }
            // Tombstones and purges only matter while older writes are queued.
            if queue.done() && streams.isEmpty {
                state.withLock { index in
                    guard index.rebuilt else { return }
                    index.tombstones.removeAll()
                    index.purges.removeAll()
                }
            }
        }
    }


    struct OpenStream {
        var fd: FileDescriptor
        var tmpPath: String
        var directory: String
        var name: FileName
        var head: StoredHead
        var storedAt: Int64
        var seq: UInt64
        var metaLength: Int
        var bodyLength = 0
        var checksum = Checksum()
    }

    /// What a record's file holds beside its body, at most in practice (its
    /// head and metadata): room made before a write counts it.
    static let headRoomBytes = 64 << 10

    private func streamOpen(_ id: UInt64, _ record: DiskRecord, seq: UInt64) {
        makeRoom(for: Self.headRoomBytes)
        let name = Self.fileName(record.head)
        let dir = directory + "/" + Self.subdirectory(name.subdirectory)
        guard makeDirectory(dir) else { return }
        let meta = DiskFormat.encodeMeta(record)
        let tmp = temporaryPath(dir, name)
        guard let fd = createTemporary(tmp) else { return }
        var stream = OpenStream(fd: fd, tmpPath: tmp, directory: dir, name: name, head: record.head, storedAt: record.storedAt,
                                seq: seq, metaLength: meta.count)
        stream.checksum.add(meta)
        // The fixed header is written last, once the length and checksum are known.
        let placeholder = [UInt8](repeating: 0, count: DiskFormat.fixedHeaderBytes)
        guard writeAll(fd, placeholder, path: tmp), writeAll(fd, meta, path: tmp) else {
            DiskIO.close(fd)
            try? DiskIO.remove(tmp)
            return
        }
        streams[id] = stream
    }

    private func streamAppend(_ id: UInt64, _ bytes: [UInt8]) {
        guard var stream = streams[id] else { return }
        makeRoom(for: bytes.count)
        guard writeAll(stream.fd, bytes, path: stream.tmpPath) else {
            DiskIO.close(stream.fd)
            try? DiskIO.remove(stream.tmpPath)
            streams[id] = nil
            return
        }
        stream.checksum.add(bytes)
        stream.bodyLength += bytes.count
        streams[id] = stream
    }

    private func streamFinish(_ id: UInt64) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        let header = DiskFormat.fixedHeader(metaLength: stream.metaLength, bodyLength: stream.bodyLength,
                                            checksum: stream.checksum.value)
        let written = writeAll(stream.fd, header, at: 0, path: stream.tmpPath)
        DiskIO.close(stream.fd)
        let final = stream.directory + "/" + stream.name.description
        do throws(Errno) {
            guard written else { throw .ioError }
            try DiskIO.rename(stream.tmpPath, to: final)
        } catch {
            fault("write", "cannot seal \(stream.tmpPath): \(error)")
            try? DiskIO.remove(stream.tmpPath)
            return
        }
        // Summed as it was written: no need to verify it on first use.
        guard indexSealed(key: stream.head.key, name: stream.name,
                          fileBytes: DiskFormat.fixedHeaderBytes + stream.metaLength + stream.bodyLength,
                          storedAt: stream.storedAt, tags: stream.head.tags, seq: stream.seq, verified: true),
              let (name, head) = joinTouchingPieces(stream.name, head: stream.head, storedAt: stream.storedAt, seq: stream.seq)
        else { return }
        dropReplacedSiblings(of: name, head: head)
    }

    /// Indexes a file just renamed into place (unless its key was removed
    /// or purged since the write was queued: false) and evicts past the limit.
    func indexSealed(key: String, name: FileName, fileBytes: Int, storedAt: Int64, tags: [String], seq: UInt64,
                             verified: Bool) -> Bool {
        let (indexed, victims) = state.withLock { index -> (Bool, [(String, FileName)]) in
            switch index.verdict(key: key, tags: tags, seq: seq) {
            case .refuse:
                // Removed meanwhile: the file just renamed into place goes, and
                // so does any entry still under its name (a hit may keep an
                // older file of that name open: it must not be served on).
                index.remove(key: key, name: name)
                return (false, [(key, name)])
            case .storeStale: _ = markStale(path(of: name))
            case .store: break
            }
            index.put(key: key, name: name, bytes: Self.charged(fileBytes), storedAt: storedAt, tags: tags)
            if verified { index.files.setVerified(key, name) }
            return (true, index.evict(limit: keptLimit))
        }
        deleteFiles(victims)
        // With the file counted: the file system's free bytes no longer hold it.
        checkSpace()
        return indexed
    }

    /// Sets a file's stale flag (a soft purge): one 4-byte write in place.
    func markStale(_ path: String) -> String? {
        do throws(Errno) {
            let fd = try DiskIO.openForWriting(path)
            defer { DiskIO.close(fd) }
            let flags = DiskFormat.staleFlag.littleEndian
            let result = withUnsafeBytes(of: flags) { raw in
                Result { () throws(Errno) in try DiskIO.writeAll(fd, raw, at: DiskFormat.flagsOffset) }
            }
            try result.get()
            return nil
        } catch .noSuchFileOrDirectory {
            return nil  // deleted meanwhile: nothing left to serve
        } catch {
            let failure = "cannot mark \(path) stale: \(error)"
            fault("purge", failure)
            return failure
        }
    }

    func deleteFiles(_ files: [(key: String, name: FileName)]) {
        for (_, name) in files { try? DiskIO.remove(path(of: name)) }
    }

    private func write(_ record: DiskRecord, seq: UInt64) {
        var record = record
        switch state.withLock({ $0.verdict(key: record.key, tags: record.tags, seq: seq) }) {
        case .refuse: return  // removed since it was queued
        case .storeStale: record.markedStale = true
        case .store: break
        }
        let name = Self.fileName(record.head)
        makeRoom(for: (record.bodyFile?.length ?? record.body.count) + Self.headRoomBytes)
        // A response whose body was left in its file (a disk hit a 304
        // refreshed): the new fields with the body copied from the old file.
        guard let fileBytes = writeInPlace(record, bodies: record.bodyFile.map { [$0] }, as: name),
              indexSealed(key: record.key, name: name, fileBytes: fileBytes, storedAt: record.storedAt, tags: record.tags, seq: seq,
                          verified: record.bodyFile != nil),
              let (name, head) = joinTouchingPieces(name, head: record.head, storedAt: record.storedAt, seq: seq)
        else { return }
        dropReplacedSiblings(of: name, head: head)
    }

    /// Writes `record`'s file and renames it into place as `name`, its
    /// body `record.body` or (`bodies`) copied from other files in turn;
    /// its size, or nil (logged).
    func writeInPlace(_ record: DiskRecord, bodies: [FileBody]?, as name: FileName) -> Int? {
        let dir = directory + "/" + Self.subdirectory(name.subdirectory)
        guard makeDirectory(dir) else { return nil }
        let tmp = temporaryPath(dir, name)
        let fileBytes: Int
        if let bodies {
            guard let written = writeCopying(record, bodies: bodies, to: tmp) else { return nil }
            fileBytes = written
        } else {
            let bytes = DiskFormat.encode(record)
            guard writeFile(tmp, bytes) else { return nil }
            fileBytes = bytes.count
        }
        do throws(Errno) {
            try DiskIO.rename(tmp, to: dir + "/" + name.description)
        } catch {
            fault("write", "cannot rename \(tmp): \(error)")
            try? DiskIO.remove(tmp)
            return nil
        }
        return fileBytes
    }

    /// Writes `record`'s file to `path` with its body read from `bodies`
    /// in turn (summed as it is copied: verified); its size, or nil (logged).
    private func writeCopying(_ record: DiskRecord, bodies: [FileBody], to path: String) -> Int? {
        guard let fd = createTemporary(path) else { return nil }
        defer { DiskIO.close(fd) }
        let meta = DiskFormat.encodeMeta(record)
        var sum = Checksum()
        sum.add(meta)
        var copied = writeAll(fd, [UInt8](repeating: 0, count: DiskFormat.fixedHeaderBytes), path: path) && writeAll(fd, meta, path: path)
        let read = copied && bodies.allSatisfy { body in
            (try? DiskIO.forEachPiece(body.file.fd, from: body.offset, length: body.length, chunk: 1 << 20) { piece in
                guard copied else { return }
                sum.add(piece)
                copied = writeAll(fd, Array(piece), path: path)
            }) == true
        }
        let bodyLength = bodies.reduce(0) { $0 + $1.length }
        let header = DiskFormat.fixedHeader(metaLength: meta.count, bodyLength: bodyLength, checksum: sum.value,
                                            flags: record.markedStale ? DiskFormat.staleFlag : 0)
        guard read, copied, writeAll(fd, header, at: 0, path: path) else {
            if copied && !read { fault("write", "cannot read the body of \(record.key) back from its file to store it again") }
            try? DiskIO.remove(path)
            return nil
        }
        return DiskFormat.fixedHeaderBytes + meta.count + bodyLength
    }

    /// Where `name` is written before it is renamed into place: marked as
    /// this instance's, so the start-up sweep of a later one deletes it.
    private func temporaryPath(_ dir: String, _ name: FileName) -> String {
        dir + "/.tmp-" + instanceToken + "-" + name.description + "-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
    }
}
