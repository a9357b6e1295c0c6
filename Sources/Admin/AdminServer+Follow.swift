import EventLoop
import HTTP1
import Proxy

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
            _ = feed?.drain()  // what queued meanwhile is no one's
        }
    }

    private func pump() {
        guard let feed, !followers.isEmpty else { return }
        let (entries, dropped) = feed.drain()
        for connection in followers.values { connection.deliver(entries, droppedByWorkers: dropped, writer: &jsonWriter) }
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
        appendChunk(Array("{\"following\": true}\n".utf8))
        flush()
        server.startFollowing(self)
    }

    /// The lines its filter admits, unless its client is too far behind
    /// (`writer`: the server's, reused for every follower and pump).
    func deliver(_ entries: [LogEntry], droppedByWorkers: Int, writer: inout AccessJSONWriter) {
        guard let filter = following else { return }
        guard output.count < AdminServer.followerBacklogBytes else {
            droppedHere += entries.reduce(0) { $0 + (filter.admits($1.line) ? 1 : 0) }
            return
        }
        let lost = droppedHere + droppedByWorkers
        if lost > 0 { writer.append("{\"dropped\": \(lost)}\n") }
        droppedHere = 0
        for entry in entries where filter.admits(entry.line) { writer.append(entry.line, time: entry.time, worker: entry.worker) }
        guard !writer.isEmpty else { return }
        appendChunk(writer.take())
        flush()
    }

    private func appendChunk(_ data: [UInt8]) {
        output.append(contentsOf: String(data.count, radix: 16).utf8)
        output.append(contentsOf: [0x0D, 0x0A])
        output.append(contentsOf: data)
        output.append(contentsOf: [0x0D, 0x0A])
    }
}
