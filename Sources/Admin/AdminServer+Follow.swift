import EventLoop
import HTTP1
import Telemetry

/// `GET /log?follow=1`: the connection becomes a chunked stream of the
/// requests its filter admits, one JSON object per line, fed from the
/// workers' queues every `followInterval` ms. A follower that reads too
/// slowly loses lines (reported to it as `{"dropped": N}`); the workers
/// never wait for it.
extension AdminServer {
    static let followInterval: UInt64 = 100
    /// Output a follower may leave unread before its lines are dropped.
    static let followerBacklogBytes = 1 << 20

    func startFollowing(_ connection: AdminConnection) {
        if followers.isEmpty { followTimer = loop.schedule(after: Self.followInterval) { [weak self] in self?.pump() } }
        followers[ObjectIdentifier(connection)] = connection
        feed?.follow()
    }

    func stopFollowing(_ connection: AdminConnection) {
        guard followers.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        feed?.unfollow()
        if followers.isEmpty {
            loop.cancel(followTimer)
            followTimer = .none
            feed?.shrink()  // what queued meanwhile is no one's; the queues give back their memory
        }
    }

    private func pump() {
        guard let feed, !followers.isEmpty else { return }
        feed.drain { dropped, lines in
            for connection in followers.values { connection.deliver(lines, droppedByWorkers: dropped, format: &lineFormat) }
        }
        followTimer = loop.schedule(after: Self.followInterval) { [weak self] in self?.pump() }
    }
}

extension AdminConnection {
    /// The stream's head and a first line saying it follows.
    func startFollowing(_ filter: LogFilter) {
        following = filter
        var head: [UInt8] = []
        ResponseSerializer.appendStatusLine(200, reason: nil, to: &head)
        ResponseSerializer.appendField("content-type", "application/x-ndjson", to: &head)
        ResponseSerializer.appendField("cache-control", "no-store", to: &head)
        ResponseSerializer.appendField("transfer-encoding", "chunked", to: &head)
        head.append(contentsOf: [0x0D, 0x0A])
        output.append(contentsOf: head)
        Array("{\"following\": true}\n".utf8).withUnsafeBytes { sendChunk($0) }
        server.startFollowing(self)
    }

    /// The lines its filter admits as one chunk, the count of those lost
    /// since the last first, unless its client is too far behind to be
    /// sent anything now (`format`: the server's, shared by every follower).
    func deliver(_ batch: LogBatch, droppedByWorkers: Int, format: inout AccessLineFormatter) {
        guard let filter = following else { return }
        droppedHere += droppedByWorkers
        if backlog >= AdminServer.followerBacklogBytes {
            batch.forEach { line in if filter.admits(line) { droppedHere += 1 } }
            return
        }
        if droppedHere > 0 { lines.append(contentsOf: "{\"dropped\": \(droppedHere)}\n".utf8) }
        droppedHere = 0
        batch.forEach { line in if filter.admits(line) { format.appendJSON(line, to: lines) } }
        guard !lines.isEmpty else { return }
        sendChunk(UnsafeRawBufferPointer(lines.bytes))
        lines.removeAll()
        lines.shrink(to: 4 << 20)  // after a burst; the usual pump's lines keep their room
    }

    private func sendChunk(_ data: UnsafeRawBufferPointer) {
        let head = Array(String(data.count, radix: 16).utf8) + [0x0D, 0x0A], end: [UInt8] = [0x0D, 0x0A]
        head.withUnsafeBytes { head in end.withUnsafeBytes { end in send([head, data, end]) } }
    }
}
