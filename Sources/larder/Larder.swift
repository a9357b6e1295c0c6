import ArgumentParser
import Configuration
import FoundationEssentials
import TLS
#if canImport(Glibc)
import Glibc
#endif

/// The `larder` command line (docs/running.md, "Using it").
@main
struct Larder: ParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "larder",
        abstract: "An HTTP caching reverse proxy.",
        discussion: """
            Larder forwards requests to its upstream (one server, or named pools that \
            routes choose) and answers repeated GET and HEAD \
            requests from a memory tier and an optional disk tier, following HTTP \
            caching (RFC 9111). Configuration: a TOML file (--config; documented \
            example in config/larder.toml, installed as /etc/larder/larder.toml); \
            flags override it.

            SIGNALS: SIGHUP re-reads the config file (and reopens the access log); \
            SIGTERM and SIGINT stop accepting, let requests in flight finish (up to \
            drain_timeout) and exit 0.

            ENVIRONMENT: LARDER_ADMIN_TOKEN (admin API token); under systemd \
            NOTIFY_SOCKET, WATCHDOG_USEC, LISTEN_FDS/LISTEN_FDNAMES (sockets named \
            proxy and admin), JOURNAL_STREAM (journald log format) and \
            CREDENTIALS_DIRECTORY (admin-token credential).

            EXIT CODES: 0 success, 64 bad usage, 78 bad configuration (file, line \
            and key named), 69 admin API unreachable, 77 admin API refused the \
            token, 1 any other failure.
            """,
        version: version,
        subcommands: [Serve.self, Purge.self, Stats.self, Top.self, LogCommand.self, FleetCommand.self, CheckConfig.self],
        defaultSubcommand: nil
    )

    /// `larder serve` with plain flags (systemd's `serve --config FILE`)
    /// starts without ArgumentParser (`ServeFlags(plain:)`); anything else
    /// (help, --version, a mistake, other commands) goes through it.
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard arguments.first == "serve", let flags = ServeFlags(plain: arguments.dropFirst()) else { return main(nil) }
        do {
            try Serve.run(flags)
        } catch {
            exit(withError: error)
        }
    }
}

/// Exit codes (sysexits), as docs/running.md lists them.
enum Exit {
    static let usage = ExitCode(64)
    static let config = ExitCode(78)
    static let failure = ExitCode(1)
    static let unavailable = ExitCode(69)
    static let noPermission = ExitCode(77)
}

/// Prints one line on stderr (with a syslog priority prefix, default
/// error, when stderr goes to the journal).
func complain(_ message: String, priority: Int = 3) {
    let prefix = JournalLogHandler.isJournal ? "<\(priority)>" : ""
    writeToStandardError("\(prefix)larder: \(message)\n")
}

/// Writes all of `text` to stderr (one write when it fits the pipe).
func writeToStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var done = 0
        while done < bytes.count {
            let n = write(2, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            done += n
        }
    }
}

/// Options shared by serve and check-config.
struct ServeOptions: ParsableArguments {
    @Option(help: "Config file (TOML). Default: $LARDER_CONFIG, else /etc/larder/larder.toml if it exists; see config/larder.toml.")
    var config: String?

    @Option(help: "Proxy listen address HOST:PORT (default 127.0.0.1:8080).")
    var listen: String?

    @Option(help: "Upstream base URL, e.g. http://127.0.0.1:9000.")
    var upstream: String?

    @Option(name: .customLong("memory-limit"), help: "Memory tier size, e.g. 256MiB.")
    var memoryLimit: String?

    @Option(name: .customLong("cache-dir"), help: "Disk tier directory, or none for memory only (default none).")
    var cacheDir: String?

    @Option(name: .customLong("disk-limit"), help: "Disk tier size, e.g. 10GiB (default 1GiB).")
    var diskLimit: String?

    @Option(help: "Worker threads (default: one per core).")
    var workers: Int?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String?

    @Option(name: .customLong("admin-listen"), help: "Admin API address HOST:PORT, or none (default 127.0.0.1:8081).")
    var adminListen: String?

    @Option(name: .customLong("admin-token-file"), help: "File holding the admin API token (also: LARDER_ADMIN_TOKEN).")
    var adminTokenFile: String?

    /// The flags as values.
    var flags: ServeFlags {
        ServeFlags(config: config, values: [
            .listen: listen, .upstream: upstream, .memory_limit: memoryLimit, .log_level: logLevel, .cache_dir: cacheDir,
            .disk_limit: diskLimit, .workers: workers.map(String.init), .admin_listen: adminListen,
            .admin_token_file: adminTokenFile,
        ].compactMapValues { $0 })
    }
}

struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a config file and print the effective settings."
    )

    @Option(help: "Config file (TOML). Default: $LARDER_CONFIG, else /etc/larder/larder.toml.")
    var config: String?

    @Flag(name: .customLong("print"), help: "Print the whole effective configuration (every key, routes included) as a config file.")
    var printAll = false

    func run() throws {
        guard let config = config ?? DefaultConfig.path else {
            complain("no config file: pass --config FILE (or set LARDER_CONFIG); \(DefaultConfig.systemPath) does not exist")
            throw Exit.usage
        }
        var settings = Settings()
        do {
            try ConfigFile.load(config, into: &settings)
        } catch {
            complain("\(error)")
            throw Exit.config
        }
        // What serve would refuse is refused here, before "ok".
        let warnings: [String]
        do {
            warnings = try ConfigChecks.run(settings, adminTokenFlag: nil)
        } catch let refusal as ConfigChecks.Refusal {
            complain("\(config): \(refusal.message)")
            throw Exit.config
        }
        for warning in warnings + [ConfigChecks.cacheDirectoryWarning(settings.cacheDirectory)].compactMap({ $0 }) {
            complain("warning: \(warning)", priority: 4)
        }
        if printAll {
            print(EffectiveConfig.render(settings), terminator: "")
            return
        }
        print("\(config): ok")
        for listener in settings.listeners {
            guard let tls = listener.tls else { print("listen = \(listener.shown)"); continue }
            let names = ((try? listener.loadTLS())?.names ?? []).map { $0.isEmpty ? "(no names)" : $0 }
            print("listen = \(listener.shown) TLS, certificates: "
                  + zip(tls.certificates, names).map { "\($0.chain) [\($1)]" }.joined(separator: ", ")
                  + (tls.strictSNI ? ", strict SNI" : ""))
        }
        print("upstream = \(settings.upstream ?? "(none: give --upstream)")")
        print("memory_limit = \(settings.memoryLimitBytes) bytes")
        print("cache_dir = \(settings.cacheDirectory ?? "none (memory only)")")
        print("disk_limit = \(settings.diskLimitBytes) bytes")
        print("workers = \(settings.workers == 0 ? "one per core" : String(settings.workers))")
        if let fleet = settings.fleet {
            print("fleet = \(fleet.name), node \(fleet.node), \(fleet.followsSentinel ? "" : "redis ")\(fleet.shown)"
                  + (fleet.passwordFile.map { ", password from \($0)" } ?? ""))
        }
    }
}
