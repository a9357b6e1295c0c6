import Configuration
import EventLoop
import FoundationEssentials
import Glibc
import HTTP3
import Logging
import TLS

extension Serve {
    /// Each listener's TLS certificates, loaded (nil for a plain listener);
    /// a certificate that cannot be used is a configuration error (78).
    static func tlsSlots(_ listeners: [ListenerConfig], logger: Logger?) throws -> [TLSContextSlot?] {
        try listeners.map { listener in
            do {
                guard let context = try listener.loadTLS() else { return nil }
                for warning in listener.keyWarnings() + listener.validityWarnings(context) { logger?.warning("\(warning)") }
                return TLSContextSlot(context)
            } catch {
                complain("\(error); fix the certificate, key or ocsp file of that [[listen]] table")
                throw Exit.config
            }
        }
    }

    /// Each listener's QUIC certificates (nil unless it serves HTTP/3);
    /// one GnuTLS cannot use is a configuration error (78).
    static func quicSlots(_ listeners: [ListenerConfig]) throws -> [QUICCredentialsSlot?] {
        try listeners.map { listener in
            do {
                return try listener.loadQUIC().map(QUICCredentialsSlot.init)
            } catch {
                complain("\(error); fix the certificate or key file of that [[listen]] table")
                throw Exit.config
            }
        }
    }

    /// The UDP sockets of an HTTP/3 listener, one per worker (SO_REUSEPORT),
    /// on the port its TCP sockets are bound to.
    static func openQUIC(_ listener: ListenerConfig, port: UInt16, workers: Int) throws -> [Int32] {
        do throws(SystemError) {
            // Alone first, as for TCP: another process's socket on the port is refused.
            Socket.close(try UDPSocket.bind(host: listener.host, port: port, reusePort: false).fd)
            var fds: [Int32] = []
            for _ in 0..<workers { fds.append(try UDPSocket.bind(host: listener.host, port: port, reusePort: true).fd) }
            return fds
        } catch {
            let shown = ListenerConfig(host: listener.host, port: port).shown
            if let refusal = StartupChecks.bindRefusal(error, key: "listen", shown: shown + " (UDP, HTTP/3)") {
                complain(refusal)
                throw Exit.config
            }
            complain("cannot \(error) for HTTP/3; free UDP port \(port) or set http3 = false on that [[listen]]")
            throw Exit.failure
        }
    }

    /// The sockets of each listener, one per worker (`proxy[listener][worker]`),
    /// and the admin listener, with the addresses to show. From systemd
    /// socket activation when sockets were passed (named "proxy" and "admin"
    /// by FileDescriptorName=; an unnamed one is the proxy; it serves as the
    /// first listener), else bound here: a listener's first socket fixes
    /// the port (it may be 0), the others join it with SO_REUSEPORT so the
    /// kernel spreads connections over the workers.
    /// Which [[listen]] entry each socket systemd passed serves: the one on
    /// its port (and address, where two share a port); else, for one named
    /// proxy or not named, the first entry (a single socket of a plain
    /// .socket unit). A socket that serves none is an error, as is a
    /// listener given two.
    static func passedSockets(_ passed: [(name: String, fd: Int32)], to listeners: [ListenerConfig]) throws -> [Int: Int32] {
        var assigned: [Int: Int32] = [:]
        var rest: [(name: String, fd: Int32)] = []
        for socket in passed {
            let address = Systemd.localAddress(socket.fd) ?? ""
            let port = UInt16(address.split(separator: ":").last ?? "") ?? 0
            let onPort = listeners.indices.filter { listeners[$0].port == port && assigned[$0] == nil }
            let match = onPort.count == 1 ? onPort.first : onPort.first { listeners[$0].shown == address }
            if let match { assigned[match] = socket.fd } else { rest.append(socket) }
        }
        for socket in rest {
            guard assigned[0] == nil, socket.name == "proxy" || socket.name == "unknown", !listeners.isEmpty else {
                complain("socket activation: the socket systemd passed as fd \(socket.fd) (\(socket.name), "
                         + "\(Systemd.localAddress(socket.fd) ?? "address unknown")) matches no [[listen]] address")
                throw Exit.failure
            }
            assigned[0] = socket.fd
        }
        return assigned
    }

    static func openListeners(_ settings: Settings, workers: Int) throws
        -> (proxy: [[Int32]], quic: [(fds: [Int32], port: UInt16)?], shown: String, admin: (fd: Int32, shown: String)?)
    {
        let passed = Systemd.takeListenFDs()
        for (name, fd) in passed where !Systemd.isListeningSocket(fd) {
            complain("socket activation: fd \(fd) (\(name)) is not a listening socket; check the .socket unit")
            throw Exit.failure
        }
        let proxyPassed = passed.filter { $0.name != "admin" }
        let adminFD = passed.first { $0.name == "admin" }?.fd
        let passedFor = try passedSockets(proxyPassed, to: settings.listeners)
        if !passed.isEmpty && passedFor.isEmpty {
            complain("socket activation: no socket for a [[listen]] address among \(passed.map(\.name)); "
                     + "bind the .socket unit to one, or set FileDescriptorName=proxy")
            throw Exit.failure
        }

        var proxy: [[Int32]] = []
        var quic: [(fds: [Int32], port: UInt16)?] = []
        var shown: [String] = []
        for (index, listener) in settings.listeners.enumerated() {
            let note = listener.tls == nil ? "" : listener.http3 ? " (TLS, HTTP/3)" : " (TLS)"
            if let proxyFD = passedFor[index] {
                // Every worker watches the same socket through its own descriptor,
                // so each can close its own when draining.
                proxy.append([proxyFD] + (1..<max(1, workers)).map { _ in fcntl(proxyFD, F_DUPFD_CLOEXEC, 3) })
                shown.append((Systemd.localAddress(proxyFD) ?? "the socket systemd passed") + note)
                let port = UInt16(Systemd.localAddress(proxyFD)?.split(separator: ":").last ?? "") ?? listener.port
                quic.append(listener.http3 ? (try openQUIC(listener, port: port, workers: workers), port) : nil)
                continue
            }
            var port = listener.port
            var sockets: [Int32] = []
            do {
                // SO_REUSEPORT would let this process join another's listener
                // on the port (another Larder, or nginx with reuseport, under
                // the same user) and the kernel split connections between
                // them: first bind it alone, which fails while anyone holds it.
                if port != 0 { Socket.close(try Socket.listen(host: listener.host, port: port, reusePort: false, backlog: 1).fd) }
                for _ in 0..<workers {
                    let socket = try Socket.listen(host: listener.host, port: port, reusePort: true)
                    port = socket.port
                    sockets.append(socket.fd)
                }
            } catch {
                if let refusal = StartupChecks.bindRefusal(error, key: "listen", shown: listener.shown) {
                    complain(refusal)
                    throw Exit.config
                }
                complain("cannot \(error); choose another address with --listen or the listen key")
                throw Exit.failure
            }
            proxy.append(sockets)
            quic.append(listener.http3 ? (try openQUIC(listener, port: port, workers: workers), port) : nil)
            shown.append(ListenerConfig(host: listener.host, port: port).shown + note)
        }

        // The admin API listens before the workers start, so a taken admin
        // port stops Larder before it serves anything.
        var admin: (fd: Int32, shown: String)?
        if let adminFD {
            admin = (adminFD, Systemd.localAddress(adminFD) ?? "the socket systemd passed")
        } else if let host = settings.adminHost {
            do {
                let listener = try Socket.listen(host: host, port: settings.adminPort, reusePort: false, backlog: 64)
                admin = (listener.fd, (host.contains(":") ? "[\(host)]" : host) + ":\(listener.port)")
            } catch {
                if let refusal = StartupChecks.bindRefusal(error, key: "admin_listen",
                                                           shown: ListenerConfig(host: host, port: settings.adminPort).shown) {
                    complain(refusal)
                    throw Exit.config
                }
                complain("cannot start the admin API: \(error); choose another address with --admin-listen or admin_listen (or none)")
                throw Exit.failure
            }
        }
        return (proxy, quic, shown.joined(separator: ", "), admin)
    }
}
