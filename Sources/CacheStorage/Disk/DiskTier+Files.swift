import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// File helpers, fault logging, and how keys and variants name files.
extension DiskTier {
    // MARK: files

    func listFiles(subdirectory: String) -> [String] {
        guard let dir = opendir(directory + "/" + subdirectory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// A file of known size in one read (no stat); nil when it is shorter.
    /// A file that grew is read up to `size`, which its header then refuses.
    func readFile(_ path: String, size: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, size - done, off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                fault("corrupt", "dropping cache file \(path): \(n < 0 ? String(cString: strerror(errno)) : "shorter than indexed")")
                unlink(path)
                return nil
            }
            done += n
        }
        return bytes
    }

    func writeFile(_ path: String, _ bytes: [UInt8]) -> Bool {
        guard let fd = createTemporary(path) else { return false }
        let written = writeAll(fd, bytes, path: path)
        close(fd)
        if !written { unlink(path) }
        return written
    }

    /// A new temporary file, or nil (logged) when the directory refuses it.
    func createTemporary(_ path: String) -> Int32? {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            fault("write", "cannot write to the cache directory (\(String(cString: strerror(errno)))); serving from memory and upstream")
            return nil
        }
        return fd
    }

    /// Logs a fault, at most once per kind every 10 seconds.
    func fault(_ kind: String, _ message: String) {
        let now = Int64(time(nil))
        let due = faults.withLock { last -> Bool in
            if let previous = last[kind], now - previous < 10 { return false }
            last[kind] = now
            return true
        }
        if due { log(message) }
    }

    // MARK: names

    static func keyHash(_ key: String) -> String {
        var sum = Checksum()
        sum.add(Array(key.utf8))
        return hex(sum.value)
    }

    static func variantHash(_ values: [String?]) -> String {
        var sum = Checksum()
        for value in values {
            sum.add(value.map { Array($0.utf8) + [0] } ?? [1])
        }
        return hex(sum.value)
    }

    static func subdirectory(_ keyHash: String) -> String { String(keyHash.prefix(2)) }

    static func charged(_ fileBytes: Int) -> Int { fileBytes + overheadBytes }

    private static func hex(_ v: UInt64) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }
}
