#if canImport(Glibc)
import Glibc
#endif

/// An environment variable's value. (ProcessInfo.environment copies every
/// variable into a dictionary on each call: 2 million instructions at start.)
public func environmentValue(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }

/// Why a file could not be read, in strerror's words.
public struct ReadFailure: Error {
    public let message: String
}

/// The whole of `path` as UTF-8 text.
public func readTextFile(_ path: String) -> Result<String, ReadFailure> {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return .failure(ReadFailure(message: String(cString: strerror(errno)))) }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n < 0 { return .failure(ReadFailure(message: String(cString: strerror(errno)))) }
        if n == 0 { break }
        bytes += chunk[0..<n]
    }
    guard let text = String(validating: bytes, as: UTF8.self) else {
        return .failure(ReadFailure(message: "not UTF-8 text"))
    }
    return .success(text)
}
