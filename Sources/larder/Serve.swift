import Admin
import ArgumentParser
import CacheStorage
import EventLoop
import Foundation
import Logging
import Proxy
import Synchronization
import Upstream

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the caching proxy."
    )

    @OptionGroup var options: ServeOptions

    func run() throws {
        let settings = try options.resolve()
        guard let upstream = settings.upstream else {
            complain("no upstream: pass --upstream URL or set upstream in the config file")
            throw Exit.usage
        }
        let level = settings.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "larder")
        let adminToken = try Self.adminToken(settings, flagFile: options.adminTokenFile)
        if let host = settings.adminHost, adminToken == nil, !Self.isLoopback(host) {
            complain("admin_listen \(host):\(settings.adminPort) is not a loopback address and no admin token is set; "
                     + "set admin_token_file (or --admin-token-file, or LARDER_ADMIN_TOKEN), or listen on 127.0.0.1")
            throw Exit.config
        }

        // Signals are blocked before any thread starts so that only the
        // signalfd sees them.
        let signals: SignalSource
        do {
            signals = try SignalSource([SIGTERM, SIGINT, SIGHUP])
        } catch {
            complain("cannot set up signal handling: \(error)")
            throw Exit.failure
        }
        let openFiles = Socket.raiseOpenFileLimit()
        if openFiles > 0 && openFiles < 4096 {
            logger.warning("only \(openFiles) open files allowed (ulimit -n); each proxied request needs two")
        }
        guard UpstreamClient.globalInit() else {
            complain("libcurl failed to initialise")
            throw Exit.failure
        }

        let workerCount = settings.effectiveWorkers
        let proxyConfig = Self.proxyConfiguration(settings, upstream: upstream)
        let memory = MemoryTier(limitBytes: settings.memoryLimitBytes)
        var disk: DiskTier?
        if let directory = settings.cacheDirectory {
            do {
                let diskLogger = logger
                disk = try DiskTier(directory: directory, limitBytes: settings.diskLimitBytes,
                                    lifetimeSeconds: settings.effectiveDiskTTLSeconds) { diskLogger.warning("\($0)") }
            } catch .inUse(let message) {
                complain(message)
                throw Exit.failure
            } catch {
                // A disk that cannot be used never stops Larder: memory and upstream still serve.
                logger.error("disk tier disabled: \(error)")
            }
        }
        let store = TieredStore(memory: memory, disk: disk, memoryLifetimeSeconds: settings.memoryTTLSeconds,
                                rehydrate: makeRehydrator(proxyConfig))
        Self.installLifetimeRules(proxyConfig.routes, store: store)
        let stats = ProxyStats()
        let collapser = Collapser()
        var accessLog: AccessLog?
        if let destination = settings.accessLog {
            do {
                accessLog = try AccessLog(destination: destination)
            } catch {
                complain("\(error); fix access_log in the config file (stdout, stderr, a file path, or off)")
                throw Exit.failure
            }
        }

        // The first listener fixes the port (it may be 0); the others join it
        // with SO_REUSEPORT so the kernel spreads connections over workers.
        var workers: [Worker] = []
        var port = settings.listenPort
        do {
            for _ in 0..<workerCount {
                let listener = try Socket.listen(host: settings.listenHost, port: port, reusePort: true)
                port = listener.port
                workers.append(try Worker(listener: listener.fd, configuration: proxyConfig, store: store, collapser: collapser,
                                          stats: stats, logger: logger, accessLog: accessLog))
            }
        } catch {
            complain("cannot \(error); choose another address with --listen or the listen key")
            throw Exit.failure
        }

        // The admin API listens before the workers start, so a taken admin
        // port stops Larder before it serves anything.
        let routesForAdmin = Mutex(proxyConfig.routes)
        var adminNote = ", admin API off"
        if let host = settings.adminHost {
            do {
                let listener = try Socket.listen(host: host, port: settings.adminPort, reusePort: false, backlog: 64)
                let adminLogger = logger
                let api = AdminAPI(store: store, stats: stats, token: adminToken, startedAt: EventLoop.wallSeconds(),
                                   clock: { EventLoop.wallSeconds() },
                                   cacheKey: { target in routesForAdmin.withLock { $0.cacheKey(target) } },
                                   log: { adminLogger.notice("\($0)") })
                let admin = try AdminServer(listener: listener.fd, api: api) { adminLogger.warning("\($0)") }
                let thread = Thread { admin.run() }
                thread.name = "larder-admin"
                thread.start()
                let shown = host.contains(":") ? "[\(host)]" : host
                adminNote = ", admin API on \(shown):\(listener.port)"
            } catch {
                complain("cannot start the admin API: \(error); choose another address with --admin-listen or admin_listen (or none)")
                throw Exit.failure
            }
        }

        for (index, worker) in workers.enumerated() {
            let thread = Thread { worker.run() }
            thread.name = "larder-worker-\(index)"
            thread.start()
        }
        let shownHost = settings.listenHost.contains(":") ? "[\(settings.listenHost)]" : settings.listenHost
        // Tests and scripts read this line to learn the port.
        let diskNote = disk.map { ", disk tier \($0.directory) limit \($0.limitBytes) bytes" } ?? ", memory only"
        complain("listening on \(shownHost):\(port) with \(workerCount) workers, upstream \(upstream), memory limit \(settings.memoryLimitBytes) bytes\(diskNote)\(adminNote)")

        let reload = Reloader(options: options, running: settings, workers: workers, store: store, logger: logger) { routes in
            routesForAdmin.withLock { $0 = routes }
        }
        try waitForSignals(signals, workers: workers, drainTimeoutMilliseconds: UInt64(settings.drainTimeoutMilliseconds),
                           logger: logger) {
            reload.reload()
            // Log rotation: every SIGHUP reopens the access log file.
            if let problem = accessLog?.reopen() { logger.error("SIGHUP: \(problem); still writing to the old file") }
        }
        // Leave the disk tier with every completed write in place.
        disk?.flush(timeoutSeconds: 10)
    }

    /// The admin token: from --admin-token-file, else LARDER_ADMIN_TOKEN,
    /// else the config's admin_token_file, else its admin_token.
    static func adminToken(_ settings: Settings, flagFile: String?) throws -> String? {
        if let flagFile { return try readAdminToken(flagFile) }
        if let env = ProcessInfo.processInfo.environment["LARDER_ADMIN_TOKEN"], !env.isEmpty { return env }
        if let file = settings.adminTokenFile { return try readAdminToken(file) }
        return settings.adminToken
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// Routes' memory_ttl / disk_ttl, for the tiers.
    static func installLifetimeRules(_ routes: RouteTable, store: TieredStore) {
        store.setLifetimeRules(routes.routes.isEmpty ? nil : routes)
    }

    /// The proxy's view of the settings.
    static func proxyConfiguration(_ settings: Settings, upstream: String) -> ProxyConfiguration {
        var proxyConfig = ProxyConfiguration(upstreamBase: upstream)
        proxyConfig.maxObjectBytes = settings.maxObjectBytes
        proxyConfig.sharedCache = settings.sharedCache
        proxyConfig.targetedCacheControl = settings.targetedCacheControl
        proxyConfig.defaultPolicy = settings.policy
        proxyConfig.allowClientPolicy = settings.allowClientPolicy
        proxyConfig.routes = RouteTable(settings.routes)
        proxyConfig.stripTagHeaders = settings.stripTagHeaders
        proxyConfig.upstreamRetries = settings.upstreamRetries
        proxyConfig.finishStoreLimitBytes = settings.finishStoreLimitBytes
        proxyConfig.keepAliveTimeoutMilliseconds = UInt64(settings.keepAliveTimeoutMilliseconds)
        proxyConfig.headerTimeoutMilliseconds = UInt64(settings.headerTimeoutMilliseconds)
        proxyConfig.limits.maxHeaderBytes = settings.maxHeaderBytes
        proxyConfig.limits.maxTargetBytes = settings.maxTargetBytes
        proxyConfig.limits.maxBodyBytes = settings.maxBodyBytes
        proxyConfig.upstream.connectTimeoutMilliseconds = settings.upstreamConnectTimeoutMilliseconds
        proxyConfig.upstream.responseTimeoutMilliseconds = settings.upstreamTimeoutMilliseconds
        proxyConfig.upstream.idleTimeoutSeconds = max(1, settings.upstreamIdleTimeoutMilliseconds / 1000)
        proxyConfig.upstream.totalTimeoutMilliseconds = settings.upstreamTotalTimeoutMilliseconds
        proxyConfig.upstream.caFile = settings.upstreamCAFile
        proxyConfig.upstream.verifyTLS = settings.upstreamTLSVerify
        // The connection limit is shared out over the workers' curl handles.
        let workers = settings.effectiveWorkers
        proxyConfig.upstream.maxConnectionsPerHost = max(1, (settings.upstreamMaxConnections + workers - 1) / workers)
        return proxyConfig
    }

    private func waitForSignals(_ signals: SignalSource, workers: [Worker], drainTimeoutMilliseconds: UInt64,
                                logger: Logger, reload: @escaping () -> Void) throws {
        let loop = try EventLoop()
        final class SignalHandler: IOHandler {
            let source: SignalSource
            let onSignal: (Int32) -> Void
            init(_ source: SignalSource, _ onSignal: @escaping (Int32) -> Void) {
                self.source = source
                self.onSignal = onSignal
            }
            func ready(_ events: IOEvents) {
                while let signal = source.next() { onSignal(signal) }
            }
        }
        var stopping = false
        // Touched only on the main loop's thread (via loop.execute).
        final class Countdown: @unchecked Sendable { var remaining: Int; init(_ n: Int) { remaining = n } }
        let countdown = Countdown(workers.count)
        let handler = SignalHandler(signals) { signal in
            if signal == SIGHUP {
                reload()
                return
            }
            guard !stopping else { return }
            stopping = true
            logger.notice("signal \(signal) received: draining connections")
            for worker in workers {
                worker.shutdown(timeoutMilliseconds: drainTimeoutMilliseconds) {
                    loop.execute {
                        countdown.remaining -= 1
                        if countdown.remaining == 0 { loop.stop() }
                    }
                }
            }
            // A worker that cannot drain does not keep the process alive.
            loop.schedule(after: drainTimeoutMilliseconds + 2000) { loop.stop() }
        }
        try loop.watch(signals.fd, .read, handler)
        loop.run()
        logger.notice("stopped")
    }
}

/// SIGHUP: re-reads the config file (flags still win) and hands the new
/// settings to every worker for new requests. Listeners, connections and
/// cached data stay. A bad file changes nothing and is logged with its
/// file, line and key.
final class Reloader {
    private let options: ServeOptions
    private var running: Settings
    private let workers: [Worker]
    private let store: TieredStore
    private let logger: Logger
    private let routesChanged: (RouteTable) -> Void

    init(options: ServeOptions, running: Settings, workers: [Worker], store: TieredStore, logger: Logger,
         routesChanged: @escaping (RouteTable) -> Void) {
        self.options = options
        self.running = running
        self.workers = workers
        self.store = store
        self.logger = logger
        self.routesChanged = routesChanged
    }

    func reload() {
        guard let file = options.config else {
            logger.notice("SIGHUP: no config file was given (--config), nothing to reload")
            return
        }
        let next: Settings
        do {
            next = try options.settings()
        } catch {
            logger.error("SIGHUP: configuration not reloaded, keeping the running one: \(error)")
            return
        }
        guard let upstream = next.upstream else {
            logger.error("SIGHUP: configuration not reloaded: \(file) sets no upstream")
            return
        }
        // What lives in sockets, threads and tiers needs a restart.
        let restartOnly: [(String, Bool)] = [
            ("listen", next.listenHost != running.listenHost || next.listenPort != running.listenPort),
            ("workers", next.workers != running.workers),
            ("memory_limit", next.memoryLimitBytes != running.memoryLimitBytes),
            ("cache_dir", next.cacheDirectory != running.cacheDirectory),
            ("disk_limit", next.diskLimitBytes != running.diskLimitBytes),
            ("memory_ttl", next.memoryTTLSeconds != running.memoryTTLSeconds),
            ("disk_ttl", next.effectiveDiskTTLSeconds != running.effectiveDiskTTLSeconds),
            ("log_level", next.logLevel != running.logLevel),
            ("admin_listen", next.adminHost != running.adminHost || next.adminPort != running.adminPort),
            ("admin_token", next.adminToken != running.adminToken || next.adminTokenFile != running.adminTokenFile),
            ("access_log", next.accessLog != running.accessLog),
            ("upstream_max_connections", next.upstreamMaxConnections != running.upstreamMaxConnections),
        ]
        for (key, changed) in restartOnly where changed {
            logger.warning("SIGHUP: \(key) changed in \(file); it takes effect after a restart")
        }
        let configuration = Serve.proxyConfiguration(next, upstream: upstream)
        for worker in workers { worker.reconfigure(configuration) }
        Serve.installLifetimeRules(configuration.routes, store: store)
        routesChanged(configuration.routes)
        running = next
        logger.notice("SIGHUP: configuration reloaded from \(file)")
    }
}
