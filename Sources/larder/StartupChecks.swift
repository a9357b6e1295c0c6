import Configuration
import EventLoop
import Proxy
import Upstream
#if canImport(Glibc)
import Glibc
#endif

/// The configuration errors `serve` would only meet while starting (or
/// worse, while serving: every request a 502 for a CA file that is not
/// there), found from the settings alone so that `check-config` and `serve`
/// refuse them alike, with exit 78 and the key named: files that must be
/// readable, a log that must be writable, listeners that must differ, and
/// tokens that must not be one.
enum StartupChecks {
    /// The first problem, as the line to print; nil when there is none.
    static func refusal(_ settings: Settings) -> String? {
        for (key, file) in [("admin_token_file", settings.adminTokenFile), ("admin_read_token_file", settings.adminReadTokenFile),
                            ("upstream_ca_file", settings.proxy.upstream.caFile)] {
            if let file, let why = unreadable(file) { return "\(key): cannot read \(file): \(why)" }
        }
        if let log = settings.accessLog, log != "stdout", log != "stderr", let why = unwritable(log) {
            return "access_log: cannot write \(log): \(why); name a writable file, stdout, stderr, or off"
        }
        var seen: Set<String> = []
        for listener in settings.listeners where listener.port != 0 {
            guard seen.insert(listener.shown).inserted else {
                return "listen: \(listener.shown) is named by two [[listen]] tables; each address may be listened on once"
            }
        }
        return nil
    }

    /// Addresses this machine cannot listen on: a name that does not
    /// resolve, or an address that is not one of its own (EADDRNOTAVAIL).
    /// Asked on an ephemeral port, never the configured one: that one may
    /// be held now by the Larder being checked before a reload, and a
    /// socket joining it would take its connections.
    static func addressRefusal(_ settings: Settings) -> String? {
        for listener in settings.listeners {
            if let why = unlistenable(listener.host) { return "listen: cannot listen on \(listener.shown): \(why)" }
        }
        if let host = settings.adminHost, let why = unlistenable(host) {
            return "admin_listen: cannot listen on \(ListenerConfig(host: host, port: settings.adminPort).shown): \(why)"
        }
        return nil
    }

    /// Ports below the kernel's unprivileged start that this process may
    /// not bind (no root, no CAP_NET_BIND_SERVICE). A warning for
    /// check-config: systemd may bind them and pass the sockets.
    static func privilegedPortWarnings(_ settings: Settings) -> [String] {
        guard !mayBindPrivilegedPorts else { return [] }
        let configured = try? readTextFile("/proc/sys/net/ipv4/ip_unprivileged_port_start").get()
        let start = UInt16(configured.flatMap { $0.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } }.map { min(max($0, 0), 65535) } ?? 1024)
        var named = settings.listeners.filter { $0.port != 0 && $0.port < start }.map { ("listen", $0.shown) }
        if let host = settings.adminHost, settings.adminPort != 0, settings.adminPort < start {
            named.append(("admin_listen", ListenerConfig(host: host, port: settings.adminPort).shown))
        }
        return named.map { "\($0.0): \($0.1) is a privileged port: serve needs CAP_NET_BIND_SERVICE (or root), "
            + "or a socket systemd binds and passes (larder.socket)" }
    }

    private static func unlistenable(_ host: String) -> String? {
        do {
            Socket.close(try Socket.listen(host: host, port: 0, reusePort: false, backlog: 1).fd)
            return nil
        } catch {
            return error.errno == EADDRNOTAVAIL ? notHere : "\(error)"
        }
    }

    static let notHere = "not an address of this machine (or a name that does not resolve)"

    /// What a failed bind of `serve` means: the key's mistake (an address
    /// not here, a privileged port) is a configuration error (78); a port
    /// in use is not (it may be free at the next start).
    static func bindRefusal(_ error: SystemError, key: String, shown: String) -> String? {
        switch error.errno {
        case EADDRNOTAVAIL: return "\(key): cannot listen on \(shown): \(notHere)"
        case EACCES: return "\(key): cannot listen on \(shown): a privileged port: serve needs CAP_NET_BIND_SERVICE (or root), "
            + "or a socket systemd binds and passes (larder.socket)"
        default: return nil
        }
    }

    /// Root, or CAP_NET_BIND_SERVICE (bit 10) among the effective capabilities.
    private static var mayBindPrivilegedPorts: Bool {
        if geteuid() == 0 { return true }
        let status = (try? readTextFile("/proc/self/status").get()) ?? ""
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
              let word = line.dropFirst(7).split(whereSeparator: \.isWhitespace).first, let mask = UInt64(word, radix: 16) else { return false }
        return mask & (1 << 10) != 0
    }

    /// The read-only token may only read: one equal to the admin token
    /// would purge. Checked on the tokens as read (from files, the
    /// environment or systemd's credentials).
    static func tokenRefusal(admin: String?, read: String?) -> String? {
        guard let admin, let read, admin == read else { return nil }
        return "admin_read_token: equal to the admin token, so the read-only token could purge; give it a value of its own"
    }

    static func unreadable(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return String(cString: strerror(errno)) }
        return info.st_mode & S_IFMT == S_IFDIR ? "it is a directory" : nil
    }

    /// Whether `serve` could open the file for appending, without creating it.
    static func unwritable(_ path: String) -> String? {
        var info = stat()
        if stat(path, &info) == 0 {
            if info.st_mode & S_IFMT == S_IFDIR { return "it is a directory" }
            return access(path, W_OK) == 0 ? nil : String(cString: strerror(errno))
        }
        let parent = path.lastIndex(of: "/").map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        guard stat(parent, &info) == 0 else { return "\(parent): \(String(cString: strerror(errno)))" }
        guard info.st_mode & S_IFMT == S_IFDIR else { return "\(parent) is not a directory" }
        return access(parent, W_OK | X_OK) == 0 ? nil : "\(parent): \(String(cString: strerror(errno)))"
    }
}
