import Configuration
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
