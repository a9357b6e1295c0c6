import Clocks
import FoundationEssentials
import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// File helpers, fault logging, and how keys and variants name files.
extension DiskTier {
    // MARK: files

    func listFiles(subdirectory: String) -> [String] { DiskIO.listDirectory(directory + "/" + subdirectory) }

    /// A stored file's path (its name starts with the key's hash, whose
    /// first byte names the sub-directory).
    func path(of name: FileName) -> String { subdirectoryPath(of: name) + "/" + name.description }

    /// Where a removed file waits for its deletion: beside it, under a name
    /// no lookup reads and the start-up rebuild deletes.
    static func gonePath(of path: String) -> String { path + ".gone" }

    /// A file found unreadable: renamed out of the stored names at once and
    /// deleted by the writer, as a removal is (a lookup on a worker's loop
    /// never unlinks there).
    func discard(_ path: String) {
        let gone = Self.gonePath(of: path)
        guard (try? DiskIO.rename(path, to: gone)) != nil else { return }
        _ = queue.push(.unlink([gone]), bytes: 0, force: true)
    }

    private func subdirectoryPath(of name: FileName) -> String { directory + "/" + Self.subdirectory(name.subdirectory) }

    /// What came of opening a stored file.
    enum Opened {
        case file(FileDescriptor)
        /// Not there (removed since the index was read, or by hand).
        case gone
        /// The process is out of descriptors even after the tier gave back
        /// the ones it keeps: a miss this time, the file stays indexed.
        case short
    }

    /// A stored file opened for reading, relative to its sub-directory's
    /// kept descriptor (one path component for the kernel to resolve).
    func openStored(_ name: FileName) -> Opened {
        switch openStoredOnce(name) {
        case .success(let fd): return .file(fd)
        case .failure(let errno) where errno == .tooManyOpenFiles || errno == .tooManyOpenFilesInSystem:
            guard releaseDescriptors() > 0, case .success(let fd) = openStoredOnce(name) else { return .short }
            return .file(fd)
        case .failure: return .gone
        }
    }

    private func openStoredOnce(_ name: FileName) -> Result<FileDescriptor, Errno> {
        let handle = subdirectories[name.subdirectory]
        var dir = handle.fd.load(ordering: .acquiring)
        do throws(Errno) {
            if dir < 0 {
                let opened = try DiskIO.openDirectory(subdirectoryPath(of: name))
                let (exchanged, current) = handle.fd.compareExchange(expected: -1, desired: opened.rawValue,
                                                                     ordering: .acquiringAndReleasing)
                if exchanged { dir = opened.rawValue } else { DiskIO.close(opened); dir = current }
            }
            return .success(try DiskIO.openForReading(name, in: FileDescriptor(rawValue: dir)))
        } catch .noSuchFileOrDirectory {
            // Usually a file removed since the index was read. But the
            // sub-directory may have been replaced under us (removed and made
            // again): then the file is found by its path, and the new
            // directory is kept for next time (the old descriptor stays
            // open: another thread may be using it).
            do throws(Errno) {
                let fd = try DiskIO.openForReading(path(of: name))
                if dir >= 0, let fresh = try? DiskIO.openDirectory(subdirectoryPath(of: name)),
                   !handle.fd.compareExchange(expected: dir, desired: fresh.rawValue, ordering: .acquiringAndReleasing).exchanged {
                    DiskIO.close(fresh)
                }
                return .success(fd)
            } catch {
                return .failure(error)
            }
        } catch {
            return .failure(error)
        }
    }

    /// A stored file of known size in one read (no stat) from `fd`, handed
    /// to `body` in the thread's `ReadScratch` (no allocation per hit). One
    /// more byte is asked for: a file of another size (replaced by a newer
    /// write since the index was read) is then read again whole, by its
    /// real size. `.unreadable` when it cannot be read (an I/O error: the
    /// file is dropped).
    func readFile<R>(named name: FileName, size: Int, from fd: FileDescriptor, mayBlock: Bool = true,
                     _ body: (UnsafeRawBufferPointer) -> R) -> FileRead<R> {
        do throws(Errno) {
            var cold = false
            let read = ReadScratch.with(count: size + 1) { buffer in
                Result { () throws(Errno) -> R? in
                    let n: Int
                    if mayBlock {
                        n = try DiskIO.read(fd, into: buffer, at: 0)
                    } else {
                        // Not all in the page cache (or not as long as indexed): an I/O thread reads it.
                        guard let cached = try DiskIO.readCached(fd, into: buffer, at: 0), cached >= size else {
                            cold = true
                            return nil
                        }
                        n = cached
                    }
                    return n == size ? body(UnsafeRawBufferPointer(rebasing: buffer[..<n])) : nil
                }
            }
            if let result = try read.get() { return .read(result) }
            if cold { return .wouldBlock }
            let real = try DiskIO.size(fd)
            // (A large file now: the next lookup opens it so.)
            if real <= Self.inlineReadLimit {
                guard mayBlock else { return .wouldBlock }  // (read again where it may wait)
                return .read(try DiskIO.read(fd, upTo: real, at: 0).withUnsafeBytes(body))
            }
        } catch {
            fault("corrupt", "dropping cache file \(path(of: name)): \(error)")
            discard(path(of: name))
        }
        return .unreadable
    }

    /// What became of reading a stored file whole.
    enum FileRead<R> {
        case read(R)
        case unreadable
        /// Asked not to wait for the disk, and it would have.
        case wouldBlock
    }

    /// A file's size, fixed header, raw metadata and record (the body left
    /// in place); nil when they do not make a record of the file's size.
    /// The first 4 KiB come in one read: the metadata nearly always fits,
    /// so the start-up rebuild costs one read per file, not two.
    /// Why a large file's body does not match its checksum (read in 1 MiB
    /// pieces), or nil when it does.
    func bodyChecksumFailure(_ fd: FileDescriptor, header h: DiskFormat.FixedHeader, meta: [UInt8]) -> String? {
        var sum = Checksum()
        sum.add(meta)
        let start = DiskFormat.fixedHeaderBytes + h.metaLength
        guard (try? DiskIO.forEachPiece(fd, from: start, length: h.bodyLength, chunk: 1 << 20, { sum.add($0) })) == true
        else { return "short read" }
        return sum.value == h.checksum ? nil : "checksum mismatch"
    }

    func readHead(_ fd: FileDescriptor) -> (size: Int, header: DiskFormat.FixedHeader, meta: [UInt8], record: DiskRecord)? {
        let fixedBytes = DiskFormat.fixedHeaderBytes
        guard let size = try? DiskIO.size(fd),
              let start = try? DiskIO.read(fd, upTo: min(size, 4096), at: 0),
              let h = try? DiskFormat.header(start[...]),
              size == fixedBytes + h.metaLength + h.bodyLength
        else { return nil }
        let meta: [UInt8]
        if start.count >= fixedBytes + h.metaLength {
            meta = Array(start[fixedBytes..<(fixedBytes + h.metaLength)])
        } else {
            guard let rest = try? DiskIO.read(fd, count: h.metaLength, at: fixedBytes) ?? nil else { return nil }
            meta = rest
        }
        guard let record = try? DiskFormat.decodeMeta(meta[...], header: h) else { return nil }
        return (size, h, meta, record)
    }

    func writeFile(_ path: String, _ bytes: [UInt8]) -> Bool {
        guard let fd = createTemporary(path) else { return false }
        let written = writeAll(fd, bytes, path: path)
        DiskIO.close(fd)
        if !written { try? DiskIO.remove(path) }
        return written
    }

    /// A new temporary file, or nil (logged) when the directory refuses it.
    func createTemporary(_ path: String) -> FileDescriptor? {
        do throws(Errno) {
            do {
                return try DiskIO.createExclusive(path)
            } catch .tooManyOpenFiles where releaseDescriptors() > 0 {
                return try DiskIO.createExclusive(path)  // with a descriptor hits kept given back
            }
        } catch {
            fault("write", "cannot write to the cache directory (\(error)); serving from memory and upstream")
            ranOutOfSpace(error)
            return nil
        }
    }

    /// Writes it all (at `offset`, or where the file stands); false (logged) on failure.
    func writeAll(_ fd: FileDescriptor, _ bytes: [UInt8], at offset: Int? = nil, path: String) -> Bool {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(Errno) in try DiskIO.writeAll(fd, raw, at: offset) } }
        guard case .failure(let error) = result else { return true }
        fault("write", "cannot write \(path): \(error); serving from memory and upstream")
        ranOutOfSpace(error)
        return false
    }

    /// Creates a sub-directory; false (logged) when it cannot.
    func makeDirectory(_ path: String) -> Bool {
        do throws(Errno) {
            try DiskIO.makeDirectory(path)
            return true
        } catch {
            fault("write", "cannot create \(path): \(error); serving from memory and upstream")
            ranOutOfSpace(error)
            return false
        }
    }

    /// Logs a fault, at most once per kind every 10 seconds.
    func fault(_ kind: String, _ message: String) {
        if kind == "write" || kind == "queue" { writeFailures.add(1, ordering: .relaxed) }
        let now = Int64(time(nil))
        let due = faults.withLock { last -> Bool in
            if let previous = last[kind], now - previous < 10 { return false }
            last[kind] = now
            return true
        }
        if due { log(message) }
    }

    // MARK: names

    static func keyHashValue(_ key: String) -> UInt64 {
        var sum = NameHash()
        sum.add(Array(key.utf8))
        return sum.value
    }

    static func variantHashValue(_ values: [String?]) -> UInt64 {
        var sum = NameHash()
        for value in values {
            sum.add(value.map { Array($0.utf8) + [0] } ?? [1])
        }
        return sum.value
    }

    /// A fan-out sub-directory's name ("00" to "ff").
    static func subdirectory(_ byte: Int) -> String { byte < 16 ? "0" + String(byte, radix: 16) : String(byte, radix: 16) }

    static func charged(_ fileBytes: Int) -> Int { fileBytes + overheadBytes }

    /// A large file: header and metadata read, the body left in place
    /// (sent from the descriptor), and kept for the next hits as for a
    /// small one. Its checksum is verified (streaming) the first time it is
    /// used after start.
    func openLarge(key: String, name: FileName, size: Int, indexed: Bool, id: UInt64, replacing: KeptFile?,
                   now: UInt64) -> CachedResponse? {
        let path = path(of: name)
        let fd: FileDescriptor
        switch openStored(name) {
        case .file(let opened): fd = opened
        case .gone:
            state.withLock { _ = $0.remove(key: key, name: name, id: id) }
            return nil
        case .short: return nil
        }
        let stored = StoredFile(fd, path: path)
        func drop(_ why: String) -> CachedResponse? {
            if state.withLock({ $0.remove(key: key, name: name, id: id) }) || id == 0 {
                fault("corrupt", "dropping unreadable cache file \(path): \(why)")
                discard(path)
            }
            return nil
        }
        guard let (size, h, meta, found) = readHead(fd) else { return drop("bad header or metadata") }
        var record = found
        guard record.key == key else { return nil }  // a hash collision
        guard !expired(key, storedAt: record.storedAt, name: name, id: id) else { return nil }
        guard indexed || !state.withLock({ $0.purgedSinceStart(key: key, tags: record.tags) }) else {
            discard(path)
            return nil
        }
        if !files.isVerified(key, name) {
            // Rarely here: the start-up rebuild verifies large files off the loop.
            if let failure = bodyChecksumFailure(fd, header: h, meta: meta) { return drop(failure) }
            if !indexed {
                state.withLock {
                    $0.insertIfAbsent(key: key, name: name, bytes: Self.charged(size), storedAt: record.storedAt, tags: record.tags)
                }
            }
            files.setVerified(key, name)
        }
        let body = FileBody(file: stored, offset: DiskFormat.fixedHeaderBytes + h.metaLength, length: h.bodyLength)
        // Its pages are asked for now (read ahead by the kernel, without
        // waiting), so that sendfile on a worker's loop seldom waits for them.
        _ = posix_fadvise(fd.rawValue, off_t(body.offset), off_t(body.length), POSIX_FADV_WILLNEED)
        record.bodyFile = body
        let entry = record.response
        files.keep(stored, head: entry, storedAt: record.storedAt, key: key, name: name, id: id, replacing: replacing, openedAt: now)
        return entry
    }
}
