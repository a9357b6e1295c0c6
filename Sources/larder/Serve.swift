import Admin
import ArgumentParser
import CacheStorage
import Clocks
import Configuration
import EventLoop
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Proxy
import Redis
import Routing
import Synchronization
import Telemetry
import Threads
import TLS
import Upstream

struct Serve: ParsableCommand {
    // Every command names itself: otherwise ArgumentParser derives the name
    // from the type's (String(describing:), a costly reflection at start-up).
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Run the caching proxy.")

    @OptionGroup var options: ServeOptions

    func run() throws { try Self.run(options.flags) }

    static func run(_ flags: ServeFlags) throws {
        let settings = try flags.resolve()
        guard let upstream = settings.upstream else {
            complain("no upstream: pass --upstream URL or set upstream in the config file")
            throw Exit.usage
        }
        let level = settings.logLevel
        let journal = JournalLogHandler.isJournal
        LoggingSystem.bootstrap { label in
            if journal {
                var handler = JournalLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "larder")
        // What check-config refuses is refused here too (78), before anything opens.
        if let refusal = StartupChecks.refusal(settings) {
            complain(refusal)
            throw Exit.config
        }
        let adminToken = try Self.adminToken(settings, flagFile: flags.adminTokenFile)
        let adminReadToken = try Self.adminReadToken(settings)
        if let refusal = StartupChecks.tokenRefusal(admin: adminToken, read: adminReadToken) {
            complain(refusal)
            throw Exit.config
        }
        if adminReadToken != nil && adminToken == nil {
            logger.warning("admin_read_token is set but no admin token: the admin API is open to every request on its address")
        }

        // Signals are blocked before any thread starts so that only the
        // signalfd sees them.
        // The main thread's loop (signals, watchdog) is made before the
        // listeners open: clients that take every descriptor at once must
        // not leave it without one after "listening on".
        let signals: SignalSource, mainLoop: EventLoop
        do {
            signals = try SignalSource([SIGTERM, SIGINT, SIGHUP])
            mainLoop = try EventLoop()
        } catch {
            complain("cannot set up signal handling: \(error)")
            throw Exit.failure
        }
        let openFiles = Socket.raiseOpenFileLimit()
        if openFiles > 0 && openFiles < 4096 {
            logger.warning("only \(openFiles) open files allowed (ulimit -n); each proxied request needs two")
        }

        let workerCount = settings.effectiveWorkers
        let proxyConfig = Self.proxyConfiguration(settings, upstream: upstream)
        BlockingWork.setSharedThreads(settings.ioThreads)
        // One wall clock for the tiers' lifetimes and the workers' ages.
        let clock = WallClock()
        var tiers: [any CacheTier] = []
        if let directory = settings.cacheDirectory {
            do {
                let diskLogger = logger
                tiers.append(try DiskTier(directory: directory, limitBytes: settings.diskLimitBytes,
                                          lifetimeSeconds: settings.effectiveDiskTTLSeconds,
                                          keptFiles: Self.keptFiles(settings.diskOpenFiles, openFiles: openFiles, logger),
                                          // The first requests of a restart come before the index
                                          // rebuild (their keys' files are read directly meanwhile).
                                          clock: clock, rebuildDelayMilliseconds: 250) {
                    diskLogger.warning("\($0)")
                })
            } catch .inUse(let message) {
                complain(message)
                throw Exit.failure
            } catch {
                // A disk that cannot be used never stops Larder: memory and upstream still serve.
                logger.error("disk tier disabled: \(error)")
            }
        }
        // Fastest first; with a disk tier behind it the memory tier leaves it the objects its shards cannot hold.
        tiers.insert(MemoryTier(limitBytes: settings.memoryLimitBytes, maxObjectBytes: proxyConfig.maxObjectBytes,
                                lifetimeSeconds: settings.memoryTTLSeconds, slowerTierBehind: !tiers.isEmpty, clock: clock), at: 0)
        let store = TieredStore(tiers: tiers)
        DescriptorRelief.install { store.releaseDescriptors() }
        RedisConnection.installDescriptorRelief { store.releaseDescriptors() }
        Self.installLifetimeRules(proxyConfig.routes, store: store)
        let stats = ProxyStats()
        let collapser = Collapser()
        var accessLog: AccessLog?
        if let destination = settings.accessLog {
            do {
                accessLog = try AccessLog(destination: destination, format: settings.accessLogFormat, workers: workerCount, stats: stats)
            } catch {
                complain("\(error); fix access_log in the config file (stdout, stderr, a file path, or off)")
                throw Exit.config
            }
        }

        // Certificates load before any socket opens: a bad one stops the start (78).
        let tlsSlots = try Self.tlsSlots(settings.listeners, logger: logger)
        let quicSlots = try Self.quicSlots(settings.listeners)
        let listeners = try Self.openListeners(settings, workers: workerCount)
        // Checked on the address actually in use: admin_listen, or a socket
        // systemd passed. Nothing serves yet, so refusing here is clean.
        if let admin = listeners.admin,
           let refusal = ConfigChecks.adminRefusal(host: Self.host(of: admin.shown), shown: admin.shown, token: adminToken) {
            complain(refusal)
            throw Exit.config
        }
        var workers: [Worker] = []
        // Samples only for an admin thread that drains them.
        let logFeed = LogFeed(), samples = listeners.admin == nil ? nil : RequestSamples()
        do {
            for index in 0..<workerCount {
                let own = listeners.proxy.indices.map { n in
                    let quic = listeners.quic[n].flatMap { udp in quicSlots[n].map { (udp.fds[index], $0, udp.port) } }
                    return ProxyListener(fd: listeners.proxy[n][index], tls: tlsSlots[n], http2: settings.listeners[n].http2, quic: quic)
                }
                let worker = try Worker(listeners: own, configuration: proxyConfig, store: store, collapser: collapser,
                                        stats: stats, logger: logger, accessLog: accessLog, clock: clock)
                worker.index = workers.count
                worker.attach(logFeed, samples: samples)
                workers.append(worker)
            }
        } catch {
            complain("cannot start a worker: \(error)")
            throw Exit.failure
        }

        let routesForAdmin = Locked(proxyConfig.routes), poolsForAdmin = Locked(proxyConfig.allPools)
        // (With the canonical keys No-Vary-Search responses are stored under.)
        let purgeScopes: @Sendable (String) -> [PurgeScope] = { target in
            store.searchVariances.withCanonicalKeys(routesForAdmin.withLock { $0.purgeScopes(target) })
        }
        let fleet = try Self.startFleet(settings, store: store, logger: logger, purgeScopes: purgeScopes)
        var adminNote = ", admin API off"
        if let (fd, shown) = listeners.admin {
            do {
                let adminLogger = logger
                let api = AdminAPI(store: store, stats: stats, token: adminToken, startedAt: EventLoop.wallSeconds(),
                                   clock: { EventLoop.wallSeconds() },
                                   purgeScopes: purgeScopes, fanOut: fleet,
                                   samples: samples, version: Larder.version,
                                   node: settings.fleet?.node ?? FleetConfig.hostName, upstream: upstream, readToken: adminReadToken,
                                   healthzPublic: settings.adminHealthzPublic, pools: { poolsForAdmin.withLock { $0 } },
                                   log: { adminLogger.notice("\($0)") })
                if ProcessInfo.processInfo.environment["LARDER_TEST_CLOCK"] == "1" {
                    logger.warning("LARDER_TEST_CLOCK=1: POST /debug/clock moves every clock on (for tests, never in service)")
                    let loops = workers.map(\.loop)
                    api.moveClock = { milliseconds in
                        TestClock.advance(milliseconds: milliseconds)
                        for loop in loops { loop.execute {} }
                    }
                }
                api.requestGuard = AdminRequestGuard(allowedHosts: settings.adminHosts)
                api.warn = { adminLogger.warning("\($0)") }
                let admin = try AdminListener(listener: fd, api: api, maxConnections: settings.adminMaxConnections, feed: logFeed,
                                              sendTimeoutMilliseconds: settings.proxy.sendTimeoutMilliseconds,
                                              allow: settings.adminAllow, logger: adminLogger)
                try startThread(name: "larder-admin") { admin.run() }
                adminNote = ", admin API on \(shown)"
            } catch {
                complain("cannot start the admin API: \(error)")
                throw Exit.failure
            }
        }

        for worker in workers {
            worker.sharedTier = fleet?.sharedTier(on: worker.loop)
            if let fleet { worker.announcePurge = { scope in fleet.send(scope, soft: false) { _ in } } }
        }
        for (index, worker) in workers.enumerated() {
            do {
                try startThread(name: "larder-worker-\(index)") { worker.run() }
            } catch {
                complain("\(error)")
                throw Exit.failure
            }
        }
        // Active health checks of upstream pools, on a thread of their own,
        // started once a pool has one: at start, or by a reload that adds one.
        let healthChecksStarted = Locked(false)
        let upstreamSettings = proxyConfig.upstream
        let startHealthChecks = { @Sendable (pools: [UpstreamPool]) throws in
            guard pools.contains(where: { $0.healthCheck != nil }),
                  healthChecksStarted.withLock({ started in defer { started = true }; return !started }) else { return }
            let checker = HealthChecker(pools: { poolsForAdmin.withLock { $0 } }, settings: { upstreamSettings },
                                        log: { logger.warning("\($0)") })
            try startThread(name: "larder-health") { checker.run() }
        }
        do {
            try startHealthChecks(proxyConfig.allPools)
        } catch {
            complain("\(error)")
            throw Exit.failure
        }
        // The I/O threads first: started after the dlopen below, each would
        // wait for the loader's lock it holds (the first disk hit did).
        BlockingWork.startAll()
        // libcurl and its ~30 libraries load on a thread of their own: a hit
        // needs none of them, and the first transfer waits if it comes sooner.
        // Started last: a dlopen holds the loader's TLS lock, which every
        // pthread_create takes. Where libcurl cannot be loaded that thread
        // ends the process, saying why; out of descriptors, it tries again.
        // At nice 10: its 17 million instructions of relocations otherwise
        // take a core from the first hits on a small machine; a transfer
        // that waits for it sleeps, leaving the CPU to it.
        let loadCurl: @Sendable () -> Void = {
            UpstreamClient.requireLibrary {
                logger.warning("libcurl cannot be loaded yet (\(UpstreamClient.libraryError() ?? "")): trying again every 100 ms")
            }
        }
        do {
            try startThread(name: "larder-curl") {
                lowerThreadPriority(idle: false)
                loadCurl()
            }
        } catch {
            loadCurl()
        }
        // Tests and scripts read this line to learn the port.
        let diskNote = tiers.compactMap { $0 as? DiskTier }.first.map { ", disk tier \($0.directory) limit \($0.limitBytes) bytes" }
            ?? ", memory only"
        let fleetNote = fleet.map { ", fleet \($0.config.name) as node \($0.config.node) on \($0.config.shown)" } ?? ""
        complain("listening on \(listeners.shown) with \(workerCount) workers, upstream \(upstream), memory limit \(settings.memoryLimitBytes) bytes\(diskNote)\(adminNote)\(fleetNote)", priority: 5)

        let reload = Reloader(flags: flags, running: settings, pools: proxyConfig.upstreams, workers: workers, store: store,
                              tlsSlots: tlsSlots, quicSlots: quicSlots,
                              logger: logger) { configuration in
            routesForAdmin.withLock { $0 = configuration.routes }
            poolsForAdmin.withLock { $0 = configuration.allPools }
            do {
                try startHealthChecks(configuration.allPools)
            } catch {
                logger.error("SIGHUP: the health checks could not start: \(error)")
            }
        }
        let service = ServiceNotifier(workers: workers, stats: stats)
        service.ready()
        try waitForSignals(signals, on: mainLoop, workers: workers, drainTimeoutMilliseconds: UInt64(settings.drainTimeoutMilliseconds),
                           logger: logger, service: service) {
            service.reloading()
            reload.reload()
            // Log rotation: every SIGHUP reopens the access log file.
            if let problem = accessLog?.reopen() { logger.error("SIGHUP: \(problem); still writing to the old file") }
            service.ready()
        }
        fleet?.stop()
        // The workers' last lines are handed in; the log's thread writes them.
        accessLog?.waitUntilWritten()
        // Leave the disk tier with every completed write in place, and its
        // sub-directories' names recorded for the next start.
        store.shutDown(timeoutSeconds: 10)
    }

    /// `[fleet]`: the purge stream on its own thread. Refuses (exit 78) a
    /// Redis other machines can reach without a password.
    static func startFleet(_ settings: Settings, store: TieredStore, logger: Logger,
                           purgeScopes: @escaping (String) -> [PurgeScope]) throws -> FleetNode? {
        guard let config = settings.fleet else { return nil }
        let password: String?, sentinelPassword: String?, tls: TLSClientContext?
        do {
            password = try config.password()
            sentinelPassword = try config.sentinelPassword()
            tls = try config.tlsContext()
        } catch {
            complain("\(error)")
            throw Exit.config
        }
        if let refusal = config.refusal(password: password) {
            complain(refusal)
            throw Exit.config
        }
        if let warning = config.passwordFileWarning() { logger.warning("\(warning)") }
        do {
            let node = try FleetNode(config, password: password, sentinelPassword: sentinelPassword, tls: tls, store: store, purgeScopes: purgeScopes,
                                     cacheDirectory: settings.cacheDirectory, logger: logger)
            try node.start()
            // Purges missed while this node was away apply before it serves (bounded: Redis may be down).
            let bound = config.connectTimeoutMilliseconds + config.timeoutMilliseconds
            if !node.waitUntilJoined(milliseconds: bound) {
                logger.warning("fleet: Redis (\(config.shown)) did not answer within \(bound) ms; serving from this node alone until it does")
            }
            return node
        } catch {
            complain("cannot start the fleet: \(error)")
            throw Exit.failure
        }
    }

    /// The admin token: from --admin-token-file, else LARDER_ADMIN_TOKEN,
    /// else systemd's credential admin-token, else the config's
    /// admin_token_file, else its admin_token.
    static func adminToken(_ settings: Settings, flagFile: String?) throws -> String? {
        try token(flagFile: flagFile, environment: "LARDER_ADMIN_TOKEN", credential: "admin-token",
                  file: settings.adminTokenFile, value: settings.adminToken)
    }

    /// The read-only token, likewise: LARDER_ADMIN_READ_TOKEN, systemd's
    /// credential admin-read-token, admin_read_token_file, admin_read_token.
    static func adminReadToken(_ settings: Settings) throws -> String? {
        try token(flagFile: nil, environment: "LARDER_ADMIN_READ_TOKEN", credential: "admin-read-token",
                  file: settings.adminReadTokenFile, value: settings.adminReadToken)
    }

    private static func token(flagFile: String?, environment: String, credential: String, file: String?,
                              value: String?) throws -> String? {
        if let flagFile { return try readAdminToken(flagFile) }
        if let env = environmentValue(environment), !env.isEmpty { return env }
        // systemd's LoadCredential=NAME:... (see systemd/larder.service).
        if let credentials = environmentValue("CREDENTIALS_DIRECTORY"), FileManager.default.fileExists(atPath: credentials + "/" + credential) {
            return try readAdminToken(credentials + "/" + credential)
        }
        if let file { return try readAdminToken(file) }
        return value
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.") || host.hasPrefix("::ffff:127.")
    }

    /// HOST of "HOST:PORT" or "[HOST]:PORT".
    static func host(of address: String) -> String {
        if address.hasPrefix("["), let close = address.firstIndex(of: "]") {
            return String(address[address.index(after: address.startIndex)..<close])
        }
        return address.lastIndex(of: ":").map { String(address[..<$0]) } ?? address
    }

    /// How many descriptors disk hits may keep open: `disk_open_files`, or
    /// by default half the open-file limit (at most 16,384); never
    /// more than half the limit, which connections need too.
    static func keptFiles(_ configured: Int, openFiles: Int, _ logger: Logger) -> Int {
        guard configured >= 0 else { return DiskFiles.defaultKeepLimit() }
        guard openFiles > 0, configured > openFiles / 2 else { return configured }
        logger.warning("disk_open_files = \(configured) is over half the open-file limit (\(openFiles)); keeping \(openFiles / 2)")
        return openFiles / 2
    }

    /// Routes' memory_ttl / disk_ttl, for the tiers.
    static func installLifetimeRules(_ routes: RouteTable, store: TieredStore) {
        store.setLifetimeRules(routes.setsLifetimes ? routes : nil)
    }

    /// The proxy's view of the settings.
    static func proxyConfiguration(_ settings: Settings, upstream: String) -> ProxyConfiguration {
        var proxyConfig = settings.proxy
        let pools = Dictionary(uniqueKeysWithValues: settings.pools.map { ($0.name, $0.make()) })
        // `upstream` names a pool (then the default one), or is a URL.
        proxyConfig.setUpstreamBase(pools[upstream]?.servers[0].base ?? upstream)
        proxyConfig.upstreams = UpstreamPools(defaultPool: pools[upstream] ?? proxyConfig.upstreams.defaultPool, named: pools)
        let (edge, routes) = settings.routesWithRules()
        proxyConfig.edge = edge
        proxyConfig.routes = RouteTable(routes)
        // Connection limits are shared out over the workers.
        let workers = settings.effectiveWorkers
        proxyConfig.upstream.maxConnectionsPerHost = max(1, (settings.upstreamMaxConnections + workers - 1) / workers)
        return proxyConfig
    }

    private static func waitForSignals(_ signals: SignalSource, on loop: EventLoop, workers: [Worker], drainTimeoutMilliseconds: UInt64,
                                logger: Logger, service: ServiceNotifier, reload: @escaping () -> Void) throws {
        service.startWatchdog(on: loop)
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
            service.stopping()
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
        // Upstream faults summed since their last line are told within the
        // summary's interval, even when no further fault comes to tell them.
        func flushFaults() {
            for line in FaultSummary.shared.due() { logger.warning("\(line)") }
            loop.schedule(after: 1_000) { flushFaults() }
        }
        flushFaults()
        loop.run()
        logger.notice("stopped")
    }
}
