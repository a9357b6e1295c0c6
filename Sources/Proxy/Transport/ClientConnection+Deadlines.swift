import EventLoop
import Telemetry
import Transport

/// The connection's deadlines (`ConnectionDeadlines`, a value) on one
/// timer of its loop, and what each does when it passes.
extension ClientConnection {
    /// Sets a deadline `milliseconds` from now; the one timer is armed
    /// again only when it would fire too late.
    func setDeadline(_ kind: ConnectionDeadlines.Kind, after milliseconds: UInt64) {
        deadlines[kind] = EventLoop.nowMilliseconds() + milliseconds
        armTimer()
    }

    func armTimer() {
        guard !deadlines.timerServes(armedAt: timerAt) else { return }
        loop.cancel(timer)
        (timer, timerAt) = (.none, 0)
        guard let next = deadlines.next else { return }
        let now = EventLoop.nowMilliseconds()
        timerAt = max(next, now)
        timer = loop.schedule(after: timerAt - now) { [unowned self] in
            // Held for the turn: a deadline may close the connection, and
            // its worker let go of it.
            let connection = self
            (connection.timer, connection.timerAt) = (.none, 0)
            while !connection.closed, let due = connection.deadlines.expired(now: EventLoop.nowMilliseconds()) {
                connection.passed(due)
            }
            if !connection.closed { connection.armTimer() }
        }
    }

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
            abort()
        case .linger:
            close()
        }
    }
}
