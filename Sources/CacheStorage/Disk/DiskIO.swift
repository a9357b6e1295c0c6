import EventLoop
import CEventLoop
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// The disk tier's file I/O, in one typed layer: descriptors are
/// swift-system's `FileDescriptor` (reads and writes retried on EINTR,
/// failures thrown as `Errno`); the file-system calls swift-system 1.x lacks
/// (unlink, rename, mkdir, flock, stat, directory listing) are here with the
/// same shape. Nothing else in `Disk/` calls the C library for files.
enum DiskIO {
    /// (On every disk hit: the C-string overload, so no `FilePath` is built.)
    static func openForReading(_ path: String) throws(Errno) -> FileDescriptor {
        try typed { try path.withCString { try FileDescriptor.open($0, .readOnly, options: .closeOnExec) } }
    }

    /// `name` in the directory open as `directory` (a disk hit: the kernel
    /// resolves one path component, not the whole path).
    static func openForReading(_ name: FileName, in directory: FileDescriptor) throws(Errno) -> FileDescriptor {
        while true {
            let fd = name.withCString { openat(directory.rawValue, $0, O_RDONLY | O_CLOEXEC) }
            if fd >= 0 { return FileDescriptor(rawValue: fd) }
            guard errno == EINTR else { throw Errno(rawValue: errno) }
        }
    }

    /// A directory, open to look files up in (`openForReading(_:in:)`).
    static func openDirectory(_ path: String) throws(Errno) -> FileDescriptor {
        try typed { try path.withCString { try FileDescriptor.open($0, .readOnly, options: [.directory, .closeOnExec]) } }
    }

    static func openForWriting(_ path: String) throws(Errno) -> FileDescriptor {
        try typed { try FileDescriptor.open(FilePath(path), .writeOnly, options: .closeOnExec) }
    }

    /// The directory's lock file, created when missing.
    static func openLockFile(_ path: String) throws(Errno) -> FileDescriptor {
        try typed {
            try FileDescriptor.open(FilePath(path), .readWrite, options: [.create, .closeOnExec], permissions: [.ownerRead, .ownerWrite])
        }
    }

    /// A new file only this process writes (a temporary file, renamed later).
    static func createExclusive(_ path: String) throws(Errno) -> FileDescriptor {
        try typed {
            try FileDescriptor.open(FilePath(path), .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec],
                                    permissions: [.ownerRead, .ownerWrite])
        }
    }

    /// `count` bytes from `offset`; nil when the file ends before them.
    static func read(_ fd: FileDescriptor, count: Int, at offset: Int) throws(Errno) -> [UInt8]? {
        EventLoop.assertOffLoop("a disk read")
        var short = false
        let bytes = try typed {
            try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                initialized = 0
                while initialized < count {
                    let n = try fd.read(fromAbsoluteOffset: Int64(offset + initialized),
                                        into: UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[initialized...]))
                    if n == 0 {
                        short = true
                        return
                    }
                    initialized += n
                }
            }
        }
        return short ? nil : bytes
    }

    /// Up to `count` bytes from `offset` (fewer where the file ends: a
    /// regular file reads short only at its end, so a short read ends it
    /// without asking again).
    static func read(_ fd: FileDescriptor, upTo count: Int, at offset: Int) throws(Errno) -> [UInt8] {
        EventLoop.assertOffLoop("a disk read")
        return try typed {
            try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                initialized = 0
                while initialized < count {
                    let wanted = count - initialized
                    let n = try fd.read(fromAbsoluteOffset: Int64(offset + initialized),
                                        into: UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[initialized...]))
                    initialized += n
                    if n < wanted { return }
                }
            }
        }
    }

    /// Up to `buffer.count` bytes from `offset` into `buffer`; how many (a
    /// regular file reads short only at its end).
    static func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        EventLoop.assertOffLoop("a disk read")
        var done = 0
        while done < buffer.count {
            let wanted = buffer.count - done
            let n = try typed { try fd.read(fromAbsoluteOffset: Int64(offset + done), into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...])) }
            done += n
            if n < wanted { break }
        }
        return done
    }

    /// Reads into `buffer` at `offset` only what the page cache holds,
    /// never waiting for the disk: nil when the first byte is not there.
    /// (Fewer bytes than asked: the rest was not there, or the file ends.)
    static func readCached(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Errno) -> Int? {
        let n = el_pread_nowait(fd.rawValue, buffer.baseAddress, buffer.count, Int64(offset))
        if n >= 0 { return n }
        if n == -Int(EAGAIN) { return nil }
        throw Errno(rawValue: Int32(-n))
    }

    /// Reads `offset..<offset+length` in pieces of at most `chunk` bytes.
    static func forEachPiece(_ fd: FileDescriptor, from offset: Int, length: Int, chunk: Int,
                             _ body: (UnsafeRawBufferPointer) -> Void) throws(Errno) -> Bool {
        EventLoop.assertOffLoop("a disk read")
        var buffer = [UInt8](repeating: 0, count: min(chunk, max(length, 1)))
        var done = 0
        while done < length {
            let want = min(buffer.count, length - done)
            let n = try typed {
                try buffer.withUnsafeMutableBytes {
                    try fd.read(fromAbsoluteOffset: Int64(offset + done), into: UnsafeMutableRawBufferPointer(rebasing: $0[..<want]))
                }
            }
            if n == 0 { return false }
            buffer.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            done += n
        }
        return true
    }

    static func writeAll(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: Int? = nil) throws(Errno) {
        EventLoop.assertOffLoop("a disk write")
        try typed {
            if let offset { _ = try fd.writeAll(toAbsoluteOffset: Int64(offset), bytes) } else { _ = try fd.writeAll(bytes) }
        }
    }

    static func close(_ fd: FileDescriptor) { try? fd.close() }

    static func size(_ fd: FileDescriptor) throws(Errno) -> Int {
        var st = stat()
        guard fstat(fd.rawValue, &st) == 0 else { throw Errno(rawValue: errno) }
        return Int(st.st_size)
    }

    /// Whether the open file still has a name (not deleted, nor replaced
    /// by a rename onto its name).
    static func isLinked(_ fd: FileDescriptor) -> Bool {
        var st = stat()
        return fstat(fd.rawValue, &st) == 0 && st.st_nlink > 0
    }

    static func size(atPath path: String) -> Int? {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : nil
    }

    /// A directory's identity and last change.
    static func stamp(ofDirectory path: String) throws(Errno) -> NameSnapshot.Stamp {
        var st = stat()
        guard stat(path, &st) == 0 else { throw Errno(rawValue: errno) }
        return NameSnapshot.Stamp(inode: UInt64(st.st_ino), seconds: Int64(st.st_mtim.tv_sec), nanoseconds: Int64(st.st_mtim.tv_nsec))
    }

    /// A whole file of at most `limit` bytes; nil when missing, unreadable or larger.
    static func readSmallFile(_ path: String, limit: Int) -> [UInt8]? {
        guard let fd = try? openForReading(path) else { return nil }
        defer { close(fd) }
        guard let size = try? size(fd), size <= limit else { return nil }
        return (try? read(fd, count: size, at: 0)) ?? nil
    }

    /// Deletes a file; one already gone is not an error.
    static func remove(_ path: String) throws(Errno) {
        EventLoop.assertOffLoop("an unlink")
        guard unlink(path) != 0, errno != ENOENT else { return }
        throw Errno(rawValue: errno)
    }

    /// Allowed on a loop: metadata only, and a removal renames its files
    /// at once so that a crash cannot bring them back (`DiskTier.remove`);
    /// their data is freed by the unlink, on the writer's thread.
    static func rename(_ from: String, to: String) throws(Errno) {
        guard Glibc.rename(from, to) == 0 else { throw Errno(rawValue: errno) }
    }

    /// Creates a directory (owner only); one that exists is not an error.
    static func makeDirectory(_ path: String) throws(Errno) {
        guard mkdir(path, 0o700) != 0, errno != EEXIST else { return }
        throw Errno(rawValue: errno)
    }

    /// Takes the file's exclusive lock without waiting (`.wouldBlock` when held).
    static func lockExclusively(_ fd: FileDescriptor) throws(Errno) {
        guard flock(fd.rawValue, LOCK_EX | LOCK_NB) == 0 else { throw Errno(rawValue: errno) }
    }

    static func listDirectory(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = entryName(entry)
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// A directory entry's name, read in place up to its NUL. Not through
    /// `entry.pointee`: that copies a whole `dirent` (280 bytes), but the
    /// kernel packs entries by their real length (`d_reclen`), so the last
    /// one in readdir's buffer may end a page before unmapped memory: the
    /// copy read past it, and a start-up rebuild of ~100,000 files crashed.
    static func entryName(_ entry: UnsafePointer<dirent>) -> String {
        let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        return String(cString: (UnsafeRawPointer(entry) + offset).assumingMemoryBound(to: CChar.self))
    }

    /// swift-system throws untyped; everything it throws is an `Errno`.
    private static func typed<T>(_ body: () throws -> T) throws(Errno) -> T {
        do {
            return try body()
        } catch let error as Errno {
            throw error
        } catch {
            throw Errno.ioError
        }
    }
}
