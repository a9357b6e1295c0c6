import CacheStorage
import Configuration
import EventLoop
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import HTTP3
import Logging
import Proxy
import TLS
import Upstream

/// SIGHUP: re-reads the config file (flags still win) and hands the new
/// settings to every worker for new requests. Listeners, connections and
/// cached data stay. A bad file changes nothing and is logged with its
/// file, line and key.
final class Reloader {
    private let flags: ServeFlags
    private var running: Settings
    private let workers: [Worker]
    private let store: TieredStore
    /// Each listener's certificates (nil: plain), replaced on reload.
    private let tlsSlots: [TLSContextSlot?]
    /// Each HTTP/3 listener's QUIC certificates, replaced on reload.
    private let quicSlots: [QUICCredentialsSlot?]
    private let logger: Logger
    private let routesChanged: (ProxyConfiguration) -> Void
    /// The running pools: a reload keeps the figures of their servers.
    private var runningPools: UpstreamPools

    init(flags: ServeFlags, running: Settings, pools: UpstreamPools, workers: [Worker], store: TieredStore,
         tlsSlots: [TLSContextSlot?], quicSlots: [QUICCredentialsSlot?], logger: Logger, routesChanged: @escaping (ProxyConfiguration) -> Void) {
        self.flags = flags
        runningPools = pools
        self.running = running
        self.workers = workers
        self.store = store
        self.tlsSlots = tlsSlots
        self.quicSlots = quicSlots
        self.logger = logger
        self.routesChanged = routesChanged
    }

    func reload() {
        guard let file = flags.configPath else {
            logger.notice("SIGHUP: no config file was given (--config), nothing to reload")
            return
        }
        let next: Settings
        do {
            next = try flags.settings()
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
            ("listen", next.listeners.map { [$0.host, "\($0.port)", "\($0.tls != nil)", "\($0.http2)", "\($0.http3)"] }
                != running.listeners.map { [$0.host, "\($0.port)", "\($0.tls != nil)", "\($0.http2)", "\($0.http3)"] }),
            ("workers", next.workers != running.workers),
            ("memory_limit", next.memoryLimitBytes != running.memoryLimitBytes),
            // It sizes the memory tier's shards, fixed when the tier is made.
            ("max_object_size", next.proxy.maxObjectBytes != running.proxy.maxObjectBytes),
            ("cache_dir", next.cacheDirectory != running.cacheDirectory),
            ("disk_limit", next.diskLimitBytes != running.diskLimitBytes),
            ("disk_open_files", next.diskOpenFiles != running.diskOpenFiles),
            ("io_threads", next.ioThreads != running.ioThreads),
            ("memory_ttl", next.memoryTTLSeconds != running.memoryTTLSeconds),
            ("disk_ttl", next.effectiveDiskTTLSeconds != running.effectiveDiskTTLSeconds),
            ("log_level", next.logLevel != running.logLevel),
            ("admin_listen", next.adminHost != running.adminHost || next.adminPort != running.adminPort),
            ("admin_token", next.adminToken != running.adminToken || next.adminTokenFile != running.adminTokenFile),
            ("admin_read_token", next.adminReadToken != running.adminReadToken || next.adminReadTokenFile != running.adminReadTokenFile),
            ("admin_healthz_public", next.adminHealthzPublic != running.adminHealthzPublic),
            ("access_log", next.accessLog != running.accessLog || next.accessLogFormat != running.accessLogFormat),
            ("upstream_max_connections", next.upstreamMaxConnections != running.upstreamMaxConnections),
            ("admin_max_connections", next.adminMaxConnections != running.adminMaxConnections),
            ("admin_hosts", next.adminHosts != running.adminHosts),
            ("admin_allow", next.adminAllow != running.adminAllow),
            ("fleet", next.fleet != running.fleet),
        ]
        for (key, changed) in restartOnly where changed {
            logger.warning("SIGHUP: \(key) changed in \(file); it takes effect after a restart")
        }
        // Certificates are read again (renewed files in place, or new
        // paths); one that cannot be used refuses the whole reload.
        var contexts: [(TLSContextSlot, TLSContext)] = []
        for (slot, listener) in zip(tlsSlots, next.listeners) {
            guard let slot else { continue }
            do {
                guard let context = try listener.loadTLS() else { continue }
                contexts.append((slot, context))
                for warning in listener.keyWarnings() + listener.validityWarnings(context) { logger.warning("SIGHUP: \(warning)") }
            } catch {
                logger.error("SIGHUP: configuration not reloaded, keeping the running one and its certificates: \(error)")
                return
            }
        }
        // QUIC's certificates the same way (GnuTLS reads them again); the
        // secret stays, so Retry tokens and resets stay valid.
        var quic: [(QUICCredentialsSlot, QUICCredentials)] = []
        for (slot, listener) in zip(quicSlots, next.listeners) {
            guard let slot else { continue }
            do {
                guard let credentials = try listener.loadQUIC(secret: slot.credentials.secret) else { continue }
                quic.append((slot, credentials))
            } catch {
                logger.error("SIGHUP: configuration not reloaded, keeping the running one and its certificates: \(error)")
                return
            }
        }
        for (slot, context) in contexts { slot.replace(with: context) }
        for (slot, credentials) in quic { slot.replace(with: credentials) }
        var configuration = Serve.proxyConfiguration(next, upstream: upstream)
        configuration.upstreams = configuration.upstreams.keepingServers(of: runningPools)
        runningPools = configuration.upstreams
        for worker in workers { worker.reconfigure(configuration) }
        Serve.installLifetimeRules(configuration.routes, store: store)
        routesChanged(configuration)
        running = next
        logger.notice("SIGHUP: configuration reloaded from \(file)")
    }
}
