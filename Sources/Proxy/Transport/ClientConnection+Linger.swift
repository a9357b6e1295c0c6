import EventLoop
import Transport

extension ClientConnection {
    /// After the last answer (an error, or Connection: close) the client may
    /// still be sending (`ConnectionFlow.lingers`): the sending side is shut
    /// down, and what comes is read and discarded for a bounded time and
    /// amount before the close (`Lingering.afterAnswer`).
    func lingerThenClose() {
        guard flow.lingers(draining: services.draining) else { close(); return }
        stream.shutdown()
        lingering = .afterAnswer
        deadlines = ConnectionDeadlines()
        setDeadline(.linger, after: lingering.milliseconds)
        interest = [.read]
        loop.setInterest(fd, interest)
    }

    func drainWhileLingering() {
        if lingering.discard(stream, into: &services.scratch) { close() }
    }
}
