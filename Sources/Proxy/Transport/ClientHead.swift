import Bytes
import HTTP1
import HTTPHeaders

/// How the body of the response written to the client is delimited.
enum ClientFraming: Equatable {
    case none, length, chunked, untilClose
    /// The transport marks the end (an HTTP/2 stream's END_STREAM).
    case endOfStream

    /// By the response's own length when it has one; else chunked for an
    /// HTTP/1.1 client and the connection's close for an HTTP/1.0 one.
    static func choose(noBody: Bool, length: Int?, minorVersion: Int) -> ClientFraming {
        if noBody { return .none }
        if length != nil { return .length }
        return minorVersion == 1 ? .chunked : .untilClose
    }
}

/// What the end of a forwarded body means to the client (RFC 9112 section
/// 6.3): a body framed by a length it did not reach is cut (the connection
/// closes); otherwise the response ends, with the chunked terminator or by
/// closing a close-delimited body. (Only a whole one is stored: RFC 9111
/// section 3.3, `UpstreamFetch`.)
enum BodyEnd: Equatable {
    case cut
    case end(terminator: Bool, close: Bool)

    static func decide(framing: ClientFraming, whole: Bool) -> BodyEnd {
        if (framing == .length || framing == .endOfStream) && !whole { return .cut }
        return .end(terminator: framing == .chunked, close: framing == .untilClose)
    }

    /// Whether the body is all there: as long as announced, or of no announced length.
    static func isWhole(expected: Int?, received: Int) -> Bool {
        expected.map { $0 == received } ?? true
    }
}

/// What a head says about the connection: nothing for an HTTP/1.1 client
/// that stays (persistence is its default), keep-alive for an HTTP/1.0 one,
/// close when Larder will close it; and, on the TLS responses of a listener
/// that also serves HTTP/3, Alt-Svc naming it (RFC 7838).
struct ConnectionField: Equatable {
    enum Persistence: Equatable { case implicit, keepAlive, close }
    var persistence: Persistence
    /// Alt-Svc's value (`h3=":PORT"; ma=86400`), or nil.
    var altService: String?

    static let implicit = ConnectionField(persistence: .implicit)
    static let keepAlive = ConnectionField(persistence: .keepAlive)
    static let close = ConnectionField(persistence: .close)

    init(persistence: Persistence, altService: String? = nil) {
        self.persistence = persistence
        self.altService = altService
    }

    init(keepAlive: Bool, minorVersion: Int, altService: String? = nil) {
        persistence = !keepAlive ? .close : minorVersion == 0 ? .keepAlive : .implicit
        self.altService = altService
    }

    /// The same, closing.
    var closing: ConnectionField { ConnectionField(persistence: .close, altService: altService) }

    func append(to head: inout [UInt8]) {
        if let altService { ResponseSerializer.appendField("Alt-Svc", altService, to: &head) }
        switch persistence {
        case .implicit: break
        case .keepAlive: head.append(contentsOf: "Connection: keep-alive\r\n".utf8)
        case .close: head.append(contentsOf: "Connection: close\r\n".utf8)
        }
    }
}

/// The heads Larder writes to a client, into a `HeadWriter` (HTTP/1.1
/// text or HTTP/2 fields): pure functions of the fields and the request's
/// circumstances (no sockets, no clock: the caller passes the Date of the
/// current second).
enum ClientHead {
    /// A response passed on from the upstream or from a shared fetch: its
    /// fields but the hidden ones (targeted cache control) and the framing,
    /// then Content-Length, Age (replacing the upstream's when `age` is
    /// set), Cache-Status, Date when it had none (RFC 9110 section 6.6.1),
    /// Transfer-Encoding or Connection.
    static func forwarded<W: HeadWriter>(status: Int, reason: String?, fields: HeaderFields, framing: ClientFraming, length: Int?,
                                         noBody: Bool, age: Int?, cacheStatus: String, date: DateHeader.Value,
                                         connection: ConnectionField, extra: [HeaderField] = [], isHidden: (String) -> Bool,
                                         as: W.Type = W.self) -> W {
        var head = W(status: status, reason: reason)
        var hasDate = false
        for field in fields {
            if field.name.isField("age") && age != nil { continue }
            if isHidden(field.name) { continue }
            // One Content-Length, the one the body is framed by (below).
            if field.name.isField("content-length") { continue }
            if field.name.isField("date") { hasDate = true }
            head.field(field.name, field.value)
        }
        // (None on a 204: RFC 9110 section 8.6.)
        if let length, framing == .length || noBody && status != 204 { head.contentLength(length) }
        for field in extra { head.field(field.name, field.value) }
        if let age { head.field("age", String(age)) }
        head.field("cache-status", cacheStatus)
        if !hasDate { head.date(date) }
        head.end(framing: framing, connection: connection)
        return head
    }

    /// An interim response passed on (RFC 9110 section 15.2): its status
    /// line and fields but hop-by-hop and framing ones; no Date, Age or
    /// Cache-Status (it is not an answer).
    static func interim<W: HeadWriter>(status: Int, fields: HeaderFields, as: W.Type = W.self) -> W {
        var head = W(status: status, reason: status == 103 ? "Early Hints" : status == 102 ? "Processing" : nil)
        for field in interimFields(fields) { head.field(field.name, field.value) }
        head.end(framing: .none, connection: .implicit)
        return head
    }

    /// The fields of an interim response a client is sent.
    static func interimFields(_ fields: HeaderFields) -> [HeaderField] {
        let nominated = HopByHop.nominated(inFields: fields)
        return fields.filter { field in
            !HopByHop.isHopByHop(field.name) && !nominated.contains(field.name) && !field.name.isField("content-length")
        }
    }

    /// A 304 for the client (RFC 9110 section 15.4.5): the fields a 200
    /// would have had that describe the representation, no body.
    static func notModified<W: HeadWriter>(fields: HeaderFields, tail: Tail, isHidden: (String) -> Bool = { _ in false },
                                           as: W.Type = W.self) -> W {
        var head = W(status: 304, reason: "Not Modified")
        var hasDate = false
        for field in fields where !isHidden(field.name) {
            switch field.name {
            case "cache-control", "content-location", "date", "etag", "expires", "vary", "last-modified":
                if field.name.isField("date") { hasDate = true }
                head.field(field.name, field.value)
            default: continue
            }
        }
        tail.write(to: &head, hasDate: hasDate)
        return head
    }

    /// 206 with the bytes `range` of a stored body of `length` bytes, or
    /// 416 when `range` is nil (RFC 9110 sections 14.4 and 15.5.17).
    static func partial<W: HeadWriter>(fields: HeaderFields, range: ClosedRange<Int>?, length: Int, tail: Tail,
                                       isHidden: (String) -> Bool, as: W.Type = W.self) -> W {
        var head = range != nil ? W(status: 206, reason: "Partial Content") : W(status: 416, reason: "Range Not Satisfiable")
        var hasDate = false
        for field in fields where !isHidden(field.name) {
            switch field.name {
            case "age", "content-length", "transfer-encoding", "connection", "keep-alive", "cache-status", "content-range":
                continue
            default:
                if field.name.isField("date") { hasDate = true }
                head.field(field.name, field.value)
            }
        }
        if let range {
            head.field("content-range", "bytes \(range.lowerBound)-\(range.upperBound)/\(length)")
            head.field("content-length", String(range.count))
        } else {
            head.field("content-range", "bytes */\(length)")
            head.field("content-length", "0")
        }
        tail.write(to: &head, hasDate: hasDate)
        return head
    }

    /// An answer made here (400, 502, 504): a line of text saying why; `close`: the connection closes after it.
    static func madeHere<W: HeadWriter>(status: Int, message: String, extra: HeaderFields, close: Bool,
                                        as: W.Type = W.self) -> (head: W, body: [UInt8]) {
        var head = W(status: status, reason: nil)
        for field in extra { head.field(field.name, field.value) }
        head.field("content-type", "text/plain; charset=utf-8")
        head.field("content-length", String(message.utf8.count + 1))
        head.end(framing: .length, connection: close ? .close : .implicit)
        return (head, Array(message.utf8) + [0x0A])
    }

    /// What follows a stored head on a hit (the stored head has its Date),
    /// and ends every head built from stored fields: Age, Cache-Status,
    /// Connection, the blank line. Appended to a buffer
    /// the worker reuses: a hit allocates nothing for it.
    static func appendHitTail(age: Int, cacheStatus: CacheStatusLine, connection: ConnectionField, to out: inout [UInt8]) {
        // Written at a cursor on the stack, then one append: the pieces
        // appended one by one cost a uniqueness and capacity check each.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 96 + cacheStatus.capacity + (connection.altService?.utf8.count ?? 0)) { buffer in
            let start = buffer.baseAddress!
            var p = start
            ByteWriting.put("Age: ", at: &p)
            ByteWriting.putDecimal(age, at: &p)
            ByteWriting.put("\r\n", at: &p)
            cacheStatus.write(at: &p)
            if var alt = connection.altService {
                ByteWriting.put("Alt-Svc: ", at: &p)
                alt.withUTF8 { ByteWriting.put($0, at: &p) }
                ByteWriting.put("\r\n", at: &p)
            }
            switch connection.persistence {
            case .implicit: break
            case .keepAlive: ByteWriting.put("Connection: keep-alive\r\n", at: &p)
            case .close: ByteWriting.put("Connection: close\r\n", at: &p)
            }
            ByteWriting.put("\r\n", at: &p)
            out.append(contentsOf: UnsafeBufferPointer(start: start, count: p - start))
        }
    }

    /// The per-request fields that end a head built from stored fields.
    struct Tail {
        var age: Int
        /// The current second's: sent only when the fields have no Date of their own.
        var date: DateHeader.Value
        /// The whole "Cache-Status: ...\r\n" line.
        var cacheStatus: CacheStatusLine
        var connection: ConnectionField
        /// Fields response rules set and add.
        var extra: [HeaderField] = []

        func write<W: HeadWriter>(to head: inout W, hasDate: Bool) {
            if !hasDate { head.date(date) }
            for field in extra { head.field(field.name, field.value) }
            head.hitTail(age: age, cacheStatus: cacheStatus, connection: connection)
        }
    }
}
