import CCurl
import EventLoop
#if canImport(Glibc)
import Glibc
#endif

/// What a tunnel tells whoever uses it, on its loop.
public protocol UpstreamTunnelDelegate: AnyObject {
    /// The connection is up (TLS too, for https): bytes may be sent.
    func tunnelConnected()
    /// It could not be made.
    func tunnelFailed(_ error: UpstreamError)
    /// The socket is readable or writable, as `want` asked.
    func tunnelReady(_ events: IOEvents)
}

/// A raw connection to an upstream server, made by libcurl
/// (CURLOPT_CONNECT_ONLY: TCP, and TLS for an https upstream, with the
/// same settings as every fetch), for bytes Larder does not interpret: an
/// upgraded connection (WebSocket) from its request to its close. Each
/// tunnel has a curl multi of its own (an `UpstreamClient`), so that the
/// pool of the worker's fetches never prunes, checks or reuses its
/// connection; once connected, the loop watches its socket for the
/// delegate and curl_easy_send / curl_easy_recv carry the bytes.
public final class UpstreamTunnel: IOHandler {
    private let client: UpstreamClient
    private let url: String
    private var easy: UnsafeMutableRawPointer?
    private unowned(unsafe) var delegate: (any UpstreamTunnelDelegate)?
    /// The connection's socket once connected (-1 before and after).
    private var fd: Int32 = -1
    private var interest: IOEvents = []

    /// `url`: the server's base (`http(s)://host:port`).
    public init(loop: EventLoop, settings: UpstreamSettings, url: String) {
        client = UpstreamClient(loop: loop, settings: settings)
        self.url = url
    }

    /// Connects; the delegate hears `tunnelConnected` or `tunnelFailed`.
    /// (The delegate must outlive the tunnel, or close it first.)
    public func start(delegate: any UpstreamTunnelDelegate) {
        self.delegate = delegate
        client.tunnel = self
        guard larder_curl_load() == 0, let easy = larder_curl_easy_init() else {
            return fail(.unreachable("the upstream client is not ready: \(String(cString: larder_curl_error()))"))
        }
        self.easy = easy
        var code = UpstreamTransfer.configureHandle(easy, client: client)
        func set(_ next: CURLcode) { if code == CURLE_OK { code = next } }
        set(larder_easy_setopt_str(easy, CURLOPT_URL, url))
        set(larder_easy_setopt_long(easy, CURLOPT_CONNECT_ONLY, 1))
        // The upgrade is HTTP/1.1's: ALPN must not settle on h2.
        set(larder_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, LARDER_CURL_HTTP_VERSION_1_1))
        guard code == CURLE_OK else {
            return fail(.invalidResponse("could not set up the upstream connection: \(String(cString: larder_curl_easy_strerror(code)))"))
        }
        if let why = client.addTunnelHandle(easy) { fail(.unreachable(why)) }
    }

    /// The connect-only transfer ended (`UpstreamClient.drainCompletions`).
    func connectDone(_ result: CURLcode) {
        guard let easy, fd < 0 else { return }
        guard result == CURLE_OK else {
            return fail(result == CURLE_OPERATION_TIMEDOUT ? .timedOut(String(cString: larder_curl_easy_strerror(result)))
                        : .unreachable(String(cString: larder_curl_easy_strerror(result))))
        }
        var socket: curl_socket_t = -1
        guard larder_easy_getinfo_socket(easy, &socket) == CURLE_OK, socket >= 0 else {
            return fail(.unreachable("the upstream connection has no socket"))
        }
        // curl no longer drives it: the loop watches it for the delegate (`want`).
        client.forget(socket)
        fd = socket
        delegate?.tunnelConnected()
    }

    private func fail(_ error: UpstreamError) {
        let delegate = self.delegate
        close()
        delegate?.tunnelFailed(error)
    }

    /// Which events to be told of (`tunnelReady`). None: the socket is not
    /// watched at all (a hang-up would otherwise be told again and again
    /// while nobody reads).
    public func want(_ events: IOEvents) {
        guard fd >= 0, events != interest else { return }
        defer { interest = events }
        if events.isEmpty { return client.loop.unwatch(fd) }
        guard interest.isEmpty else { return client.loop.setInterest(fd, events) }
        do {
            try client.loop.watch(fd, events, self)
        } catch {
            fail(.unreachable("cannot watch the upstream connection: \(error)"))
        }
    }

    public func ready(_ events: IOEvents) { delegate?.tunnelReady(events) }

    public enum Received: Equatable {
        case bytes(Int)
        case wouldBlock
        /// The upstream closed its side.
        case closed
        case failed(String)
    }

    /// Reads what the connection has (TLS may hold more than the socket
    /// shows: read until it would block).
    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> Received {
        guard let easy, fd >= 0 else { return .closed }
        var got = 0
        let code = larder_curl_easy_recv(easy, buffer.baseAddress, buffer.count, &got)
        switch code {
        case CURLE_OK: return got == 0 ? .closed : .bytes(got)
        case CURLE_AGAIN: return .wouldBlock
        default: return .failed(String(cString: larder_curl_easy_strerror(code)))
        }
    }

    /// Sends: how many bytes were taken (0: none for now); nil when the
    /// connection failed.
    public func send(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard let easy, fd >= 0, !bytes.isEmpty else { return bytes.isEmpty ? 0 : nil }
        var sent = 0
        let code = larder_curl_easy_send(easy, bytes.baseAddress, bytes.count, &sent)
        switch code {
        case CURLE_OK: return sent
        case CURLE_AGAIN: return 0
        default: return nil
        }
    }

    /// Closes the connection (harmless twice).
    public func close() {
        delegate = nil
        if fd >= 0 && !interest.isEmpty { client.loop.unwatch(fd) }
        fd = -1
        interest = []
        if let easy {
            self.easy = nil
            client.removeTunnelHandle(easy)
            larder_curl_easy_cleanup(easy)
        }
        client.tunnel = nil
    }
}
