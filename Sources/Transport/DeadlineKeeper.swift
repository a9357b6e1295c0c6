import EventLoop

/// A connection whose deadlines (`ConnectionDeadlines`, a value) share one
/// timer of its loop, HTTP/1.1's and HTTP/2's alike: setting a deadline
/// arms the timer again only when it would fire too late; when it fires,
/// every deadline passed is acted on, earliest first (`passed`), and the
/// timer is armed for what is left. The timer holds the connection
/// `unowned` (a closed connection cancels it): a weak reference gives it a
/// side table, and every retain of it a slow path.
public protocol DeadlineKeeper: AnyObject {
    var deadlines: ConnectionDeadlines { get set }
    /// The one timer, and when it fires (0: not armed).
    var timer: TimerID { get set }
    var timerAt: UInt64 { get set }
    var loop: EventLoop { get }
    var closed: Bool { get }
    /// A deadline passed.
    func passed(_ deadline: ConnectionDeadlines.Kind)
}

extension DeadlineKeeper {
    /// Sets a deadline `milliseconds` from now.
    @inlinable
    public func setDeadline(_ kind: ConnectionDeadlines.Kind, after milliseconds: UInt64) {
        deadlines[kind] = loop.now() + milliseconds
        armTimer()
    }

    /// Arms the timer for the earliest deadline, unless the one armed fires no later.
    @inlinable
    public func armTimer() {
        guard !deadlines.timerServes(armedAt: timerAt) else { return }
        loop.cancel(timer)
        (timer, timerAt) = (.none, 0)
        guard let next = deadlines.next else { return }
        let now = loop.now()
        timerAt = max(next, now)
        timer = loop.schedule(after: timerAt - now) { [unowned self] in
            // Held for the turn: a deadline may close the connection, and
            // its owner let go of it.
            let connection = self
            (connection.timer, connection.timerAt) = (.none, 0)
            while !connection.closed, let due = connection.deadlines.expired(now: loop.now()) {
                connection.passed(due)
            }
            if !connection.closed { connection.armTimer() }
        }
    }

    /// Cancels the timer (the connection closes, or starts over).
    @inlinable
    public func cancelTimer() {
        loop.cancel(timer)
        (timer, timerAt) = (.none, 0)
    }
}
