import EventLoop
import Telemetry
import Transport

/// The connection's deadlines (`ConnectionDeadlines`) on one timer of its
/// loop (`DeadlineKeeper`), and what each does when it passes.
extension ClientConnection: DeadlineKeeper {
    /// A deadline passed.
    func passed(_ deadline: ConnectionDeadlines.Kind) {
        switch deadline {
        case .idle:
            // header_timeout or keep_alive_timeout (never while an answer is made).
            guard exchange == nil else { return }
            if !stream.isOpen { WorkerStats.bump(counters.tlsFailures) }  // handshake_timeout
            if unparsedCount > 0 || body != nil { sendError(408, "request timeout", close: true) } else { close() }
        case .body:
            // body_timeout: a body held back because the upstream reads slowly does not count.
            guard body != nil else { return }
            let timeout = settings.bodyTimeoutMilliseconds
            if exchange?.isUploadCongested ?? false { return setDeadline(.body, after: timeout) }
            failRequest(408, "request body timeout: no body bytes for \(timeout) ms")
        case .send:
            // send_timeout: a client that takes no output for this long is
            // dropped (its queued answers would otherwise be held for ever).
            guard !output.isEmpty else { return }
            WorkerStats.bump(counters.sendTimeouts)
            exchange?.sendTimedOut(after: settings.sendTimeoutMilliseconds)
            abort()
        case .linger:
            close()
        case .window:
            break  // (HTTP/2's)
        }
    }
}
