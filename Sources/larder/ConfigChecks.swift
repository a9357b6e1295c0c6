import Configuration
import FoundationEssentials
import Proxy
import Routing
import TLS
#if canImport(Glibc)
import Glibc
#endif

/// Where the config file is when `--config` is not given: the file
/// `LARDER_CONFIG` names, else `/etc/larder/larder.toml` when it exists
/// (nil: none, defaults and flags only).
enum DefaultConfig {
    static let systemPath = "/etc/larder/larder.toml"

    static var path: String? {
        if let named = environmentValue("LARDER_CONFIG"), !named.isEmpty { return named }
        // access(2), not FileManager: making FileManager.default cost every start ~0.2 ms.
        return access(systemPath, F_OK) == 0 ? systemPath : nil
    }
}

/// What `serve` refuses of its settings before it serves (exit 78), checked
/// by `serve` and `check-config` alike so that a file check-config passes
/// is one serve starts with. Warnings are returned; a refusal is thrown as
/// the message to print.
enum ConfigChecks {
    struct Refusal: Error { let message: String }

    static func run(_ settings: Settings, adminTokenFlag: String?) throws -> [String] {
        var warnings: [String] = []
        if let refusal = StartupChecks.refusal(settings) { throw Refusal(message: refusal) }
        // serve's binds, without taking the configured ports (a Larder may hold them).
        if let refusal = StartupChecks.addressRefusal(settings) { throw Refusal(message: refusal) }
        warnings += StartupChecks.privilegedPortWarnings(settings)
        if let refusal = StartupChecks.tokenRefusal(admin: try Serve.adminToken(settings, flagFile: adminTokenFlag),
                                                    read: try Serve.adminReadToken(settings)) {
            throw Refusal(message: refusal)
        }
        // TLS listeners: every certificate, key and OCSP file loads.
        for listener in settings.listeners where listener.tls != nil {
            do {
                if let context = try listener.loadTLS() { warnings += listener.validityWarnings(context) }
                // HTTP/3's TLS is GnuTLS's: it reads the same files itself.
                _ = try listener.loadQUIC()
            } catch {
                throw Refusal(message: "\(error); fix the certificate, key or ocsp file of that [[listen]] table")
            }
            warnings += listener.keyWarnings()
        }
        // Cached POSTs: their keys digest bodies with OpenSSL's SHA-256.
        if settings.routes.contains(where: \.cachePost) {
            do {
                try TLSContext.loadLibrary()
            } catch {
                throw Refusal(message: "\(error): cache_post digests request bodies with OpenSSL's SHA-256")
            }
        }
        // The admin API: off loopback only with a token.
        if let host = settings.adminHost, let refusal = adminRefusal(host: host, shown: "\(host):\(settings.adminPort)",
                                                                     token: try Serve.adminToken(settings, flagFile: adminTokenFlag)) {
            throw Refusal(message: refusal)
        }
        // A fleet: a Redis others can reach needs a password.
        if let fleet = settings.fleet {
            let password: String?
            do {
                password = try fleet.password()
                _ = try fleet.sentinelPassword()
                _ = try fleet.tlsContext()
            } catch {
                throw Refusal(message: "\(error)")
            }
            if let refusal = fleet.refusal(password: password) { throw Refusal(message: refusal) }
            if let warning = fleet.passwordFileWarning() { warnings.append(warning) }
        }
        return warnings
    }

    /// Why `serve` (as this user) would run without the disk tier that
    /// `cache_dir` names: a disk that cannot be used does not stop it (it
    /// logs "disk tier disabled" and serves from memory), so check-config
    /// says so beforehand. nil when the directory is usable or can be made.
    static func cacheDirectoryWarning(_ directory: String?) -> String? {
        guard let directory else { return nil }
        let consequence = "serve would run without a disk tier (memory only)"
        func isDirectory(_ path: String) -> Bool? {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            return info.st_mode & S_IFMT == S_IFDIR
        }
        func writable(_ path: String) -> Bool { access(path, W_OK | X_OK) == 0 }
        switch isDirectory(directory) {
        case true?:
            return writable(directory) ? nil : "cache_dir \(directory) is not writable by this user: \(consequence) "
                + "unless the service runs as a user that may write it"
        case false?:
            return "cache_dir \(directory) is not a directory: \(consequence)"
        case nil:
            // Created with one mkdir: its parent must be a directory this user may write.
            let parent = directory.hasSuffix("/") ? String(directory.dropLast()) : directory
            let parentPath = parent.lastIndex(of: "/").map { $0 == parent.startIndex ? "/" : String(parent[..<$0]) } ?? "."
            guard isDirectory(parentPath) == true else {
                return "cache_dir \(directory) cannot be created: \(parentPath) is not a directory: \(consequence)"
            }
            return writable(parentPath) ? nil : "cache_dir \(directory) does not exist and this user cannot create it in "
                + "\(parentPath): \(consequence) unless the service creates it (systemd's CacheDirectory=)"
        }
    }

    /// The refusal of an admin API at `host` (shown as `shown`) without a token, if any.
    static func adminRefusal(host: String, shown: String, token: String?) -> String? {
        guard token == nil, !Serve.isLoopback(host) else { return nil }
        return "the admin API address \(shown) is not a loopback address and no admin token is set; "
            + "set admin_token_file (or --admin-token-file, or LARDER_ADMIN_TOKEN), or admin_listen = \"127.0.0.1:8081\""
    }
}
