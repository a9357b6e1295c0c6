import Bytes
import CacheStorage
import HTTP1
import HTTP2

/// Where a head Larder builds for a client goes, piece by piece: HTTP/1.1
/// text (`HTTP1Head`) or an HTTP/2 stream's fields (`HTTP2Head`). The heads
/// themselves (`ClientHead`) are written once, for both; what is about an
/// HTTP/1.1 connection (chunked framing, the Connection field) is the
/// HTTP/1.1 writer's alone.
protocol HeadWriter {
    init(status: Int, reason: String?)
    /// The head of a whole answer from `entry`, its stored fields, before
    /// its `hitTail`.
    init(stored entry: CachedResponse, dropping edits: ResponseEdits?)
    /// Whether a stored head goes as it is stored (HTTP/1.1: its bytes
    /// straight from the entry's block, no copy, then the tail's bytes).
    static var sendsStoredHeadAsIs: Bool { get }
    /// A field as Larder carries it (a value's bytes one scalar each: `FieldBytes`).
    mutating func field(_ name: String, _ value: String)
    mutating func contentLength(_ length: Int)
    /// The Date of the current second.
    mutating func date(_ date: DateHeader.Value)
    /// Age, Cache-Status and the connection's field: how every head built
    /// from stored fields ends (the head is complete).
    mutating func hitTail(age: Int, cacheStatus: CacheStatusLine, connection: ConnectionField)
    /// The body's framing and the connection's persistence; the head is complete.
    mutating func end(framing: ClientFraming, connection: ConnectionField)
}

/// A head as HTTP/1.1 text.
struct HTTP1Head: HeadWriter {
    private(set) var bytes: [UInt8] = []
    static var sendsStoredHeadAsIs: Bool { true }

    /// (A copy of the stored head's bytes; the hit path queues them from the block instead.)
    init(stored entry: CachedResponse, dropping edits: ResponseEdits?) {
        guard let edits, !edits.drops.isEmpty else {
            bytes = Array(UnsafeRawBufferPointer(start: entry.blockStart, count: entry.headLength))
            return
        }
        edits.drops.appendHead(entry.headPrefix, to: &bytes)
    }

    init(status: Int, reason: String?) {
        bytes.reserveCapacity(512)
        ResponseSerializer.appendStatusLine(status, reason: reason, to: &bytes)
    }

    mutating func field(_ name: String, _ value: String) { ResponseSerializer.appendField(name, value, to: &bytes) }
    mutating func contentLength(_ length: Int) { ResponseSerializer.appendContentLength(length, to: &bytes) }
    mutating func date(_ date: DateHeader.Value) { bytes += date.line }

    mutating func hitTail(age: Int, cacheStatus: CacheStatusLine, connection: ConnectionField) {
        ClientHead.appendHitTail(age: age, cacheStatus: cacheStatus, connection: connection, to: &bytes)
    }

    mutating func end(framing: ClientFraming, connection: ConnectionField) {
        if framing == .chunked { bytes += "Transfer-Encoding: chunked\r\n".utf8 }
        (framing == .untilClose ? connection.closing : connection).append(to: &bytes)
        bytes += [0x0D, 0x0A]
    }
}

/// A head as an HTTP/2 stream's fields (RFC 9113 section 8.3.2): names in
/// lower case, and none of the fields that are about an HTTP/1.1
/// connection (section 8.2.2).
struct HTTP2Head: HeadWriter {
    private(set) var block: HeaderBlock
    static var sendsStoredHeadAsIs: Bool { false }

    init(status: Int, reason: String?) { block = HeaderBlock(status: status) }

    mutating func field(_ name: String, _ value: String) {
        guard !Self.isConnectionSpecific(name.utf8) else { return }
        block.append(name: name) { FieldBytes.append(value, to: &$0) }
    }

    /// A field as stored bytes (a stored head's).
    mutating func field(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        guard !Self.isConnectionSpecific(name) else { return }
        block.append(name: name) { $0 += value }
    }

    mutating func contentLength(_ length: Int) {
        block.append(name: "content-length") { ResponseSerializer.appendDecimal(length, to: &$0) }
    }

    mutating func date(_ date: DateHeader.Value) { block.append(name: "date") { $0 += date.value } }

    mutating func hitTail(age: Int, cacheStatus: CacheStatusLine, connection: ConnectionField) {
        block.append(name: "age") { ResponseSerializer.appendDecimal(age, to: &$0) }
        block.append(name: "cache-status") { cacheStatus.appendValue(to: &$0) }
        if let alt = connection.altService { field("alt-svc", alt) }
    }

    /// (The stream's END_STREAM frames the body; its persistence is the connection's.)
    mutating func end(framing: ClientFraming, connection: ConnectionField) {
        if let alt = connection.altService { field("alt-svc", alt) }
    }

    /// The stored fields of `entry`, `:status` first (its stored head is
    /// the storage's form; its fields are read from there as bytes).
    init(stored entry: CachedResponse, dropping edits: ResponseEdits?) {
        self.init(status: entry.status, reason: nil)
        let drops = edits?.drops
        entry.forEachStoredField { name, value in
            if let drops, drops.contains(bytes: name) { return }
            field(name: name, value: value)
        }
    }

    private static let connectionSpecific: [[UInt8]] = ["connection", "keep-alive", "proxy-connection", "transfer-encoding",
                                                        "upgrade"].map { Array($0.utf8) }

    private static func isConnectionSpecific(_ name: some Collection<UInt8>) -> Bool {
        connectionSpecific.contains { $0.count == name.count && zip($0, name).allSatisfy { $0 == ($1 | 0x20) } }
    }
}
