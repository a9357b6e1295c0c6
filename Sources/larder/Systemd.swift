import Configuration
import EventLoop
import FoundationEssentials
import Proxy
import Telemetry
#if canImport(Glibc)
import Glibc
#endif

/// The service manager's protocols, spoken directly rather than through
/// libsystemd: both are small, documented and stable (sd_notify(3),
/// sd_listen_fds(3)), and this keeps Larder free of a C dependency that
/// only systemd hosts have.
enum Systemd {
    // MARK: sd_notify

    /// The notification socket from NOTIFY_SOCKET, opened once; nil when
    /// not run by systemd (or the socket is unusable).
    private static let notifier: (fd: Int32, address: sockaddr_un, length: socklen_t)? = {
        guard let path = environmentValue("NOTIFY_SOCKET"), !path.isEmpty,
              path.hasPrefix("/") || path.hasPrefix("@"), path.utf8.count < 108 else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes[0] == UInt8(ascii: "@") { bytes[0] = 0 }  // an abstract socket
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes[0] == 0 ? 0 : 1))
        return (fd, address, length)
    }()

    /// Sends one notification ("READY=1", "STATUS=...", several lines
    /// joined by newlines). Does nothing outside systemd.
    static func notify(_ message: String) {
        guard var target = notifier else { return }
        let bytes = Array(message.utf8)
        _ = withUnsafePointer(to: &target.address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bytes.withUnsafeBytes { sendto(target.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), address, target.length) }
            }
        }
    }

    /// CLOCK_MONOTONIC in microseconds, for RELOADING=1's MONOTONIC_USEC.
    static func monotonicMicroseconds() -> UInt64 { EventLoop.nowMicroseconds() }

    /// The watchdog interval in microseconds when systemd expects pings from
    /// this process (WATCHDOG_USEC, and WATCHDOG_PID if set is ours).
    static var watchdogMicroseconds: UInt64? {
        guard let text = environmentValue("WATCHDOG_USEC"), let usec = UInt64(text), usec > 0 else { return nil }
        if let pid = environmentValue("WATCHDOG_PID"), Int32(pid) != getpid() { return nil }
        return usec
    }

    // MARK: socket activation

    /// Listening sockets passed by systemd (LISTEN_FDS from fd 3 on, for
    /// this process per LISTEN_PID), by their FileDescriptorName ("unknown"
    /// when unnamed). The variables are removed so children do not inherit
    /// them, and the sockets are made close-on-exec and nonblocking.
    static func takeListenFDs() -> [(name: String, fd: Int32)] {
        let environment = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"].reduce(into: [String: String]()) { $0[$1] = environmentValue($1) }
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pidText = environment["LISTEN_PID"], Int32(pidText) == getpid(),
              let countText = environment["LISTEN_FDS"], let count = Int32(countText), count > 0, count < 256 else { return [] }
        let names = environment["LISTEN_FDNAMES"]?.split(separator: ":", omittingEmptySubsequences: false).map(String.init) ?? []
        return (0..<count).map { i in
            let fd = 3 + i
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            return (Int(i) < names.count ? names[Int(i)] : "unknown", fd)
        }
    }

    /// Whether `fd` is a listening stream socket.
    static func isListeningSocket(_ fd: Int32) -> Bool {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &length) == 0 && value == 1
    }

    /// "HOST:PORT" a socket is bound to (for the start-up line).
    static func localAddress(_ fd: Int32) -> String? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var port = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let rc = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), &port, socklen_t(port.count), NI_NUMERICHOST | NI_NUMERICSERV)
            }
        }
        guard rc == 0 else { return nil }
        let h = String(cString: host), p = String(cString: port)
        return h.contains(":") ? "[\(h)]:\(p)" : "\(h):\(p)"
    }
}

/// What Larder tells systemd: READY=1 once serving, RELOADING=1 and READY=1
/// around a reload, STOPPING=1, STATUS= summaries, and WATCHDOG=1 pings
/// sent from the main loop only while every worker's loop answers, so a
/// stuck worker stops the pings and systemd restarts the service.
/// Used on the main thread only.
final class ServiceNotifier {
    private let workers: [Worker]
    private let stats: ProxyStats
    private var lastProbe: UInt64 = 0
    private var stopped = false

    init(workers: [Worker], stats: ProxyStats) {
        self.workers = workers
        self.stats = stats
    }

    func ready() { Systemd.notify("READY=1\nSTATUS=" + status()) }

    func reloading() { Systemd.notify("RELOADING=1\nMONOTONIC_USEC=\(Systemd.monotonicMicroseconds())") }

    func stopping() {
        stopped = true
        Systemd.notify("STOPPING=1\nSTATUS=draining connections")
    }

    /// A short summary for `systemctl status`.
    func status() -> String {
        let hits = stats.total(.hits) + stats.total(.staleHits)
        let misses = stats.total(.misses)
        let ratio = hits + misses == 0 ? 0 : hits * 100 / (hits + misses)
        return "serving; \(hits) hits, \(misses) misses (hit ratio \(ratio)%)"
    }

    /// Pings at half of WATCHDOG_USEC when systemd asks for them.
    func startWatchdog(on loop: EventLoop) {
        guard let usec = Systemd.watchdogMicroseconds else { return }
        let interval = max(1, usec / 2000)
        func tick() {
            let now = EventLoop.nowMilliseconds()
            // Every worker answered the previous probe (or we are draining,
            // when finished workers no longer answer).
            if stopped || workers.allSatisfy({ $0.lastHeartbeat >= lastProbe }) {
                Systemd.notify("WATCHDOG=1\nSTATUS=" + (stopped ? "draining connections" : status()))
            }
            lastProbe = now
            for worker in workers { worker.probe(now) }
            loop.schedule(after: interval) { tick() }
        }
        tick()
    }
}
