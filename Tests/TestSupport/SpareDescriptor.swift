import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Running out of descriptors on purpose: one spare descriptor held open,
/// and (`withTightLimit`) the process's limit just above it, so that the
/// next open fails with EMFILE until `relieve` (what a test installs as
/// the daemon's descriptor relief) closes the spare.
public final class SpareDescriptor: Sendable {
    /// The spare's number: the lowest that was free, so the one an open
    /// gets once it is given back.
    public let number: Int32
    private let open = Atomic<Int32>(-1)
    /// How often `relieve` was asked.
    public let asked = Atomic<Int>(0)

    public init() {
        number = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
        open.store(number, ordering: .relaxed)
    }

    /// Closes the spare the first time (1 given back), then has nothing (0).
    public func relieve() -> Int {
        asked.add(1, ordering: .relaxed)
        let fd = open.exchange(-1, ordering: .relaxed)
        guard fd >= 0 else { return 0 }
        close(fd)
        return 1
    }

    /// Runs `body` with RLIMIT_NOFILE just above the spare (none is free
    /// below it), the limit restored afterwards; nil when it cannot be set.
    public func withTightLimit<T>(_ body: () throws -> T) rethrows -> T? {
        var limit = rlimit()
        guard number >= 0, getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        defer { _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) }
        var tight = limit
        tight.rlim_cur = rlim_t(number + 1)
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &tight) == 0 else { return nil }
        return try body()
    }
}
