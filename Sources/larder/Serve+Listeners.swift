import EventLoop
import FoundationEssentials
import Glibc
import Logging
import TLS

extension Serve {
    /// Each listener's TLS certificates, loaded (nil for a plain listener);
    /// a certificate that cannot be used is a configuration error (78).
    static func tlsSlots(_ listeners: [ListenerConfig], logger: Logger?) throws -> [TLSContextSlot?] {
        try listeners.map { listener in
            do {
                guard let context = try listener.loadTLS() else { return nil }
                for warning in listener.keyWarnings() { logger?.warning("\(warning)") }
                return TLSContextSlot(context)
            } catch {
                complain("\(error); fix the certificate, key or ocsp file of that [[listen]] table")
                throw Exit.config
            }
        }
    }

    /// The sockets of each listener, one per worker (`proxy[listener][worker]`),
    /// and the admin listener, with the addresses to show. From systemd
    /// socket activation when sockets were passed (named "proxy" and "admin"
    /// by FileDescriptorName=; an unnamed one is the proxy; it serves as the
    /// first listener), else bound here: a listener's first socket fixes
    /// the port (it may be 0), the others join it with SO_REUSEPORT so the
    /// kernel spreads connections over the workers.
    static func openListeners(_ settings: Settings, workers: Int) throws
        -> (proxy: [[Int32]], shown: String, admin: (fd: Int32, shown: String)?)
    {
        let passed = Systemd.takeListenFDs()
        var proxyFD: Int32?
        var adminFD: Int32?
        for (name, fd) in passed {
            guard Systemd.isListeningSocket(fd) else {
                complain("socket activation: fd \(fd) (\(name)) is not a listening socket; check the .socket unit")
                throw Exit.failure
            }
            switch name {
            case "admin": adminFD = fd
            case "proxy": proxyFD = fd
            default: if proxyFD == nil { proxyFD = fd }
            }
        }
        if !passed.isEmpty && proxyFD == nil {
            complain("socket activation: no socket named proxy among \(passed.map(\.name)); set FileDescriptorName=proxy")
            throw Exit.failure
        }

        var proxy: [[Int32]] = []
        var shown: [String] = []
        for (index, listener) in settings.listeners.enumerated() {
            let note = listener.tls == nil ? "" : " (TLS)"
            if index == 0, let proxyFD {
                // Every worker watches the same socket through its own descriptor,
                // so each can close its own when draining.
                proxy.append([proxyFD] + (1..<max(1, workers)).map { _ in fcntl(proxyFD, F_DUPFD_CLOEXEC, 3) })
                shown.append((Systemd.localAddress(proxyFD) ?? "the socket systemd passed") + note)
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
                complain("cannot \(error); choose another address with --listen or the listen key")
                throw Exit.failure
            }
            proxy.append(sockets)
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
                complain("cannot start the admin API: \(error); choose another address with --admin-listen or admin_listen (or none)")
                throw Exit.failure
            }
        }
        return (proxy, shown.joined(separator: ", "), admin)
    }
}
