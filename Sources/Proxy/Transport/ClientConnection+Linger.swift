import EventLoop

extension ClientConnection {
    /// After the last answer (an error, or Connection: close) the client may
    /// still be sending (`ConnectionFlow.lingers`): the sending side is shut
    /// down, and what comes is read and discarded for a bounded time and
    /// amount before the close.
    static let lingerMilliseconds: UInt64 = 5_000
    static let lingerMaxBytes = 8 << 20

    func lingerThenClose() {
        guard flow.lingers(draining: services.draining) else { close(); return }
        tls?.shutdown()
        Socket.shutdownWrite(fd)
        deadlines = ConnectionDeadlines()
        setDeadline(.linger, after: Self.lingerMilliseconds)
        interest = [.read]
        loop.setInterest(fd, interest)
    }

    func drainWhileLingering() {
        for _ in 0..<4 {
            let n: Int?
            do {
                n = try services.scratch.withUnsafeMutableBytes { (buf) throws(SystemError) -> Int? in try Socket.read(fd, into: buf) }
            } catch {
                close()
                return
            }
            guard let n else { return }
            lingeredBytes += n
            if n == 0 || lingeredBytes > Self.lingerMaxBytes {
                close()
                return
            }
        }
    }
}
