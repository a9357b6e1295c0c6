import CCurl
#if canImport(Glibc)
import Glibc
#endif
import EventLoop

/// One `curl_multi` per worker, driven by that worker's event loop through
/// CURLMOPT_SOCKETFUNCTION / CURLMOPT_TIMERFUNCTION and
/// `curl_multi_socket_action`. No threads, no polling: curl says which
/// sockets and which single timeout it cares about, and the loop reports back.
public final class UpstreamClient {
    let loop: EventLoop
    /// Applies to transfers started after it is set.
    public var settings: UpstreamSettings
    /// Made at the first transfer: libcurl may still be loading before.
    private var multiHandle: UnsafeMutableRawPointer?
    private var timer: TimerID = .none
    private var sockets: [Int32: CurlSocketWatcher] = [:]
    /// Depth of calls into libcurl; handles are never removed while > 0.
    var inCurl = 0
    private var pendingRemovals: [UpstreamTransfer] = []
    private var idleHandles: [UnsafeMutableRawPointer] = []
    public private(set) var activeTransfers = 0

    /// Loads libcurl (once per process, from any thread: later callers wait
    /// for the first), or ends the process saying why (exit 1). While the
    /// process is short of descriptors (a burst of connections at start) it
    /// tries again every 100 ms, calling `retrying` once.
    public static func requireLibrary(retrying: () -> Void = {}) {
        var told = false
        while larder_curl_load() != 0 && larder_curl_failed_for_good() == 0 {
            if !told { retrying() }
            told = true
            usleep(100_000)
        }
        larder_curl_require()
        LibraryWait.loaded()
    }

    /// The reason libcurl cannot be used (nil: it is loaded), loading it now
    /// if no one has yet.
    public static func libraryError() -> String? {
        larder_curl_load() == 0 ? nil : String(cString: larder_curl_error())
    }

    public init(loop: EventLoop, settings: UpstreamSettings) {
        self.loop = loop
        self.settings = settings
    }

    /// The multi handle, made at the first transfer (waiting for libcurl);
    /// nil while libcurl cannot be loaded yet or the multi cannot be made
    /// (out of descriptors: it needs a socket pair). Then that transfer
    /// fails as an unreachable upstream and a later one tries again.
    private func readyMulti() -> UnsafeMutableRawPointer? {
        if let multiHandle { return multiHandle }
        guard larder_curl_load() == 0, let multi = larder_curl_multi_init() else { return nil }
        multiHandle = multi
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = larder_multi_setopt_socketcb(multi, curlSocketFunction)
        _ = larder_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, me)
        _ = larder_multi_setopt_timercb(multi, curlTimerFunction)
        _ = larder_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, me)
        _ = larder_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, settings.maxConnectionsPerHost)
        _ = larder_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, settings.maxConnectionsPerHost)
        _ = larder_multi_setopt_long(multi, CURLMOPT_PIPELINING, 2 /* CURLPIPE_MULTIPLEX */)
        return multi
    }

    /// The multi handle once a transfer has made it (what drives transfers
    /// and collects them runs only for transfers it holds).
    private var multi: UnsafeMutableRawPointer { multiHandle! }

    deinit {
        shuttingDown = true
        for handle in idleHandles { larder_curl_easy_cleanup(handle) }
        if let multiHandle { larder_curl_multi_cleanup(multiHandle) }
    }

    /// The one tunnel this client connects (a client of its own per tunnel):
    /// its connect-only transfer's end is the tunnel's, and its handle stays.
    unowned(unsafe) var tunnel: UpstreamTunnel?

    /// Adds a tunnel's connect-only handle; why it could not be, if not.
    func addTunnelHandle(_ easy: UnsafeMutableRawPointer) -> String? {
        guard let multi = readyMulti() else { return "out of descriptors or memory" }
        let added = larder_curl_multi_add_handle(multi, easy)
        return added == CURLM_OK ? nil : String(cString: larder_curl_multi_strerror(added))
    }

    func removeTunnelHandle(_ easy: UnsafeMutableRawPointer) {
        guard let multiHandle else { return }
        _ = larder_curl_multi_remove_handle(multiHandle, easy)
    }

    /// Set while the multi handle is cleaned up: sockets are only closed then.
    private var shuttingDown = false
    /// Sockets curl made for connections (CURLOPT_SOCKOPTFUNCTION); curl
    /// closes them through `socketClosed`, so they may stay registered with
    /// epoll while idle in curl's pool.
    private var connectionSockets: Set<Int32> = []

    /// Starts a transfer (`UpstreamRequester.start`). The delegate hears
    /// about it on this loop's thread.
    func startTransfer(_ request: UpstreamRequest, delegate: UpstreamTransferDelegate) -> UpstreamTransfer {
        let transfer = UpstreamTransfer(client: self, easy: nil, request: request, delegate: delegate)
        if multiHandle == nil {
            switch larder_curl_load_unless_busy() {
            case 1:
                // libcurl is loading on another thread (just after a start):
                // the transfer begins once it is in, and this loop serves its
                // other connections meanwhile instead of waiting on the lock.
                if waitingForLibrary.isEmpty { LibraryWait.add(on: loop) { [weak self] in self?.libraryLoaded() } }
                waitingForLibrary.append(transfer)
                if case .none = request.body { transfer.armResponseTimer() }
                return transfer
            case 0:
                LibraryWait.loaded()  // loaded here, maybe: the loops that waited for it go on
            default:
                break
            }
        }
        begin(transfer)
        return transfer
    }

    /// Transfers started while libcurl was loading on another thread.
    private var waitingForLibrary: [UpstreamTransfer] = []

    private func libraryLoaded() {
        let waiting = waitingForLibrary
        waitingForLibrary = []
        for transfer in waiting where !transfer.hasEnded { begin(transfer) }
    }

    private func begin(_ transfer: UpstreamTransfer) {
        let pooled = idleHandles.popLast()
        guard let multi = readyMulti(), let easy = pooled ?? larder_curl_easy_init() else {
            let why = larder_curl_load() == 0 ? "out of descriptors or memory" : String(cString: larder_curl_error())
            transfer.failEarly(.unreachable("the upstream client is not ready: \(why)"))
            return
        }
        transfer.easy = easy
        let code = transfer.configure(fresh: pooled == nil)
        if code != CURLE_OK {
            transfer.failEarly(.invalidResponse("could not set up the upstream request: \(String(cString: larder_curl_easy_strerror(code)))"))
            return
        }
        let added = larder_curl_multi_add_handle(multi, easy)
        if added != CURLM_OK {
            transfer.failEarly(.unreachable("could not start the upstream request: \(String(cString: larder_curl_multi_strerror(added)))"))
            return
        }
        activeTransfers += 1
        // upstream_timeout counts from the end of the request: an upload in
        // progress is bounded by body_timeout and the idle timeout instead.
        if case .none = transfer.request.body { transfer.armResponseTimer() }
    }

    // MARK: driving libcurl

    func socketAction(_ fd: Int32, _ mask: Int32) {
        var running: Int32 = 0
        inCurl += 1
        _ = larder_curl_multi_socket_action(multi, fd, mask, &running)
        inCurl -= 1
        drainCompletions()
    }

    /// The one place finished transfers are collected (after every socket_action).
    private func drainCompletions() {
        guard inCurl == 0 else { return }
        var remaining: Int32 = 0
        while let message = larder_curl_multi_info_read(multi, &remaining) {
            guard larder_msg_done(message) != 0 else { continue }
            let easy = larder_msg_easy(message)!
            let result = larder_msg_result(message)  // copy before removing the handle
            if let tunnel {
                tunnel.connectDone(result)  // (its handle stays: send and recv find the connection through it)
                continue
            }
            var raw: UnsafeMutableRawPointer?
            _ = larder_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &raw)
            guard let raw else { continue }
            let transfer = Unmanaged<UpstreamTransfer>.fromOpaque(raw).takeUnretainedValue()
            detach(transfer)
            transfer.finish(result)
        }
        while let transfer = pendingRemovals.popLast() { detach(transfer) }
    }

    /// Removes a transfer's handle from the multi and recycles it.
    func detach(_ transfer: UpstreamTransfer) {
        guard let easy = transfer.easy else { return }
        if inCurl > 0 {
            pendingRemovals.append(transfer)
            return
        }
        _ = larder_curl_multi_remove_handle(multi, easy)
        activeTransfers -= 1
        // No curl_easy_reset: the handle keeps the options all transfers share.
        transfer.clearRequestOptions()
        transfer.easy = nil
        transfer.releaseResources()
        if idleHandles.count < 64 { idleHandles.append(easy) } else { larder_curl_easy_cleanup(easy) }
    }

    /// Asks curl to continue a paused transfer. Deferred to its own loop turn
    /// so that curl never re-enters our write path from inside it.
    func unpause(_ transfer: UpstreamTransfer) {
        loop.schedule(after: 0) { [weak self, weak transfer] in
            guard let self, let transfer, let easy = transfer.easy else { return }
            self.inCurl += 1
            _ = larder_curl_easy_pause(easy, LARDER_CURLPAUSE_CONT)
            self.inCurl -= 1
            self.drainCompletions()
        }
    }

    // MARK: CURLMOPT_SOCKETFUNCTION / CURLMOPT_TIMERFUNCTION

    fileprivate func socketFunction(_ fd: Int32, _ what: Int32) {
        if what == CURL_POLL_REMOVE {
            guard let watcher = sockets[fd] else { return }
            if connectionSockets.contains(fd) {
                // A connection going back to curl's pool: usually the next
                // transfer takes it again at once. It stays registered (no
                // epoll_ctl now and none then); an event while idle drops it.
                watcher.idle = true
            } else {
                forget(fd)
            }
            return
        }
        var interest: IOEvents = []
        if what & CURL_POLL_IN != 0 { interest.insert(.read) }
        if what & CURL_POLL_OUT != 0 { interest.insert(.write) }
        if let watcher = sockets[fd] {
            watcher.idle = false
            if watcher.interest != interest {
                loop.setInterest(fd, interest)
                watcher.interest = interest
            }
        } else {
            let watcher = CurlSocketWatcher(fd: fd, client: self, interest: interest)
            sockets[fd] = watcher
            do { try loop.watch(fd, interest, watcher) } catch { sockets[fd] = nil }
        }
    }

    /// Stops watching a socket (curl no longer cares, or it was closed).
    func forget(_ fd: Int32) {
        if sockets.removeValue(forKey: fd) != nil { loop.unwatch(fd) }
    }

    /// curl made a socket for a connection. A watcher left for the same
    /// number belongs to a socket closed behind our back: drop it first.
    fileprivate func socketOpened(_ fd: Int32) {
        guard !shuttingDown else { return }
        forget(fd)
        connectionSockets.insert(fd)
    }

    /// curl closes a connection socket (CURLOPT_CLOSESOCKETFUNCTION): forget it, then close it.
    fileprivate func socketClosed(_ fd: Int32) -> Int32 {
        if !shuttingDown {
            forget(fd)
            connectionSockets.remove(fd)
        }
        return Glibc.close(fd)
    }

    fileprivate func timerFunction(_ timeoutMilliseconds: Int) {
        loop.cancel(timer)
        timer = .none
        guard timeoutMilliseconds >= 0 else { return }
        timer = loop.schedule(after: UInt64(timeoutMilliseconds), timerFired)
    }

    /// Made once: curl asks for a new timeout several times per transfer,
    /// and a fresh closure each time would be an allocation each time.
    private lazy var timerFired: () -> Void = { [weak self] in
        guard let self else { return }
        self.timer = .none
        self.socketAction(LARDER_CURL_SOCKET_TIMEOUT, 0)
    }
}

/// Reports readiness of one curl socket back to the multi handle.
private final class CurlSocketWatcher: IOHandler {
    let fd: Int32
    unowned let client: UpstreamClient
    /// What epoll is told to report.
    var interest: IOEvents
    /// curl has put the connection back in its pool (POLL_REMOVE).
    var idle = false
    init(fd: Int32, client: UpstreamClient, interest: IOEvents) {
        self.fd = fd
        self.client = client
        self.interest = interest
    }
    func ready(_ events: IOEvents) {
        if idle {
            // The upstream closed (or wrote to) a pooled connection: curl
            // finds out when it next checks the connection; stop watching.
            client.forget(fd)
            return
        }
        var mask: Int32 = 0
        if events.contains(.read) { mask |= CURL_CSELECT_IN }
        if events.contains(.write) { mask |= CURL_CSELECT_OUT }
        if events.contains(.error) { mask |= CURL_CSELECT_ERR }
        // A hang-up with nothing left to read still needs curl to notice.
        if events.contains(.hangup) && mask == 0 { mask |= CURL_CSELECT_IN }
        client.socketAction(fd, mask)
    }
}

private let curlSocketFunction: larder_curl_socket_cb = { _, fd, what, userp, _ in
    guard let userp else { return 0 }
    Unmanaged<UpstreamClient>.fromOpaque(userp).takeUnretainedValue().socketFunction(fd, what)
    return 0
}

let curlSockoptFunction: larder_curl_sockopt_cb = { clientp, fd, purpose in
    if let clientp, purpose == LARDER_CURLSOCKTYPE_IPCXN {
        Unmanaged<UpstreamClient>.fromOpaque(clientp).takeUnretainedValue().socketOpened(fd)
    }
    return 0  // CURL_SOCKOPT_OK
}

let curlCloseSocketFunction: larder_curl_closesocket_cb = { clientp, fd in
    guard let clientp else { return Glibc.close(fd) }
    return Unmanaged<UpstreamClient>.fromOpaque(clientp).takeUnretainedValue().socketClosed(fd)
}

private let curlTimerFunction: larder_curl_timer_cb = { _, timeout, userp in
    guard let userp else { return 0 }
    Unmanaged<UpstreamClient>.fromOpaque(userp).takeUnretainedValue().timerFunction(timeout)
    return 0
}
