import EventLoop
import Telemetry
import Transport

/// An HTTP/2 connection's deadlines, on the model HTTP/1.1's use
/// (`ConnectionDeadlines` on one timer, `DeadlineKeeper`): set as events
/// happen, acted on when they pass. An idle connection wakes its worker
/// once per timeout, not once a second.
extension HTTP2Connection: DeadlineKeeper {
    /// No stream is open: the connection closes keepalive_timeout from
    /// now (header_timeout before its first request).
    func idleFromNow() {
        setDeadline(.idle, after: servedAny ? settings.keepAliveTimeoutMilliseconds : settings.headerTimeoutMilliseconds)
    }

    /// After a write: send_timeout runs while the session's bytes wait for
    /// the socket, from the last write that moved them.
    func outputMoved(_ wrote: Bool) {
        if !outputWaits {
            if deadlines[.send] != nil { deadlines[.send] = nil }
        } else if wrote || deadlines[.send] == nil {
            setDeadline(.send, after: settings.sendTimeoutMilliseconds)
        }
    }

    /// A stream's body waits for its client to open the window:
    /// send_timeout from the stream's last progress.
    func watchWindow(_ stream: RequestStream) {
        guard deadlines[.window] == nil else { return }
        deadlines[.window] = stream.lastProgress + settings.sendTimeoutMilliseconds
        armTimer()
    }

    func passed(_ deadline: ConnectionDeadlines.Kind) {
        switch deadline {
        case .idle:
            if streams.isEmpty { close() }
        case .send:
            guard outputWaits else { return }
            WorkerStats.bump(services.counters.sendTimeouts)
            abort()
        case .window:
            // Each stream whose client kept its window shut for send_timeout
            // is reset; the deadline moves to the next one's.
            let now = loop.now(), send = settings.sendTimeoutMilliseconds
            var next = UInt64.max
            for stream in streams.values where stream.isWaitingForClient {
                if now - stream.lastProgress >= send {
                    WorkerStats.bump(services.counters.sendTimeouts)
                    resetStream(stream, code: .cancel)
                } else {
                    next = min(next, stream.lastProgress + send)
                }
            }
            if next != .max { deadlines[.window] = next }
        case .linger:
            close()
        case .body:
            break  // (a request body's pace is the client's window: HTTP/1.1's)
        }
    }
}
