import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream
import HTTPHeaders

/// Answers from the store: a hit, a 304 to the client's conditional, a
/// 206/416 for a range, the fields that close a stored head.
extension Exchange {
    // MARK: answers from the store

    /// Writes a stored response: its prepared head, a per-request tail
    /// (Age, Date, Cache-Status, Connection) and its body, or a 304 when the
    /// client's own conditional request matches it.
    /// Returns false, having sent nothing, when the body is a disk file that
    /// can no longer be opened.
    @discardableResult
    func serveStored(_ entry: CachedResponse, age: Int, now: Int64, cacheStatus: [UInt8]) -> Bool {
        // Validators are read from the stored head only when the client sent a conditional.
        if hasClientConditional, entry.status == 200,
           clientIsNotModified(etag: entry.etag, lastModified: entry.lastModified, dateValue: entry.timing.dateValue) {
            noteAnswer(304, cache: cacheStatus, bodyBytes: 0)
            sendNotModified(entry.headers, age: age, now: now, cacheStatus: cacheStatus)
            complete()
            return true
        }
        var file: OpenFile?
        if let bodyFile = entry.bodyFile, request.method != "HEAD" {
            guard let fd = try? Socket.openForReading(bodyFile.path) else { return false }
            file = OpenFile(fd: fd)
            // A file cut short behind Larder's back would be sent as a short
            // body (the connection then cut) on every hit: drop it instead.
            if let size = Socket.fileSize(fd), size < bodyFile.offset + bodyFile.length {
                let expected = bodyFile.offset + bodyFile.length
                worker.logger.warning("stored body \(bodyFile.path) is \(size) bytes, shorter than recorded (\(expected)): entry dropped, fetching \(key) again")
                return false
            }
        }
        if request.method == "GET", entry.status == 200, request.header("range") != nil {
            switch ByteRange.evaluate(range: request.combinedHeader("range"), ifRange: request.header("if-range"),
                                      length: entry.bodyLength, etag: entry.etag, lastModified: entry.lastModified) {
            case .full: break
            case .partial(let first, let last):
                sendPartial(entry, file: file, first: first, last: last, age: age, now: now, cacheStatus: cacheStatus)
                return true
            case .unsatisfiable:
                sendPartial(entry, file: file, first: nil, last: nil, age: age, now: now, cacheStatus: cacheStatus)
                return true
            }
        }
        if worker.accessLog != nil {
            noteAnswer(entry.status, cache: cacheStatus, bodyBytes: request.method == "HEAD" ? 0 : entry.bodyLength)
        }
        worker.headScratch.removeAll(keepingCapacity: true)
        worker.headScratch.append(contentsOf: "Age: ".utf8)
        ResponseSerializer.appendDecimal(age, to: &worker.headScratch)
        worker.headScratch.append(contentsOf: [0x0D, 0x0A])
        worker.headScratch.append(contentsOf: cacheStatus)
        appendConnectionField(to: &worker.headScratch)
        worker.headScratch.append(contentsOf: [0x0D, 0x0A])
        let headLength = entry.headLength
        connection.enqueue(entry, from: 0, to: headLength)
        worker.headScratch.withUnsafeBytes { connection.enqueue(copying: $0) }
        if let file, let bodyFile = entry.bodyFile {
            connection.enqueue(file: file, from: bodyFile.offset, to: bodyFile.offset + bodyFile.length)
        } else if request.method != "HEAD" {
            connection.enqueue(entry, from: headLength, to: headLength + entry.bodyLength)
        }
        complete()
        return true
    }

    /// 206 with one range of the stored body, or 416 when `first` is nil
    /// (RFC 9110 sections 14.4 and 15.5.17).
    func sendPartial(_ entry: CachedResponse, file: OpenFile?, first: Int?, last: Int?, age: Int, now: Int64,
                             cacheStatus: [UInt8]) {
        let length = entry.bodyLength
        noteAnswer(first != nil ? 206 : 416, cache: cacheStatus, bodyBytes: first.flatMap { f in last.map { $0 - f + 1 } } ?? 0)
        var head = Array((first != nil ? "HTTP/1.1 206 Partial Content\r\n" : "HTTP/1.1 416 Range Not Satisfiable\r\n").utf8)
        for field in entry.headers where !builder.isHidden(field.name) {
            switch field.name {
            case "age", "content-length", "transfer-encoding", "connection", "keep-alive", "cache-status", "content-range":
                continue
            default: ResponseSerializer.appendField(field.name, field.value, to: &head)
            }
        }
        if let first, let last {
            ResponseSerializer.appendField("content-range", "bytes \(first)-\(last)/\(length)", to: &head)
            ResponseSerializer.appendField("content-length", String(last - first + 1), to: &head)
        } else {
            ResponseSerializer.appendField("content-range", "bytes */\(length)", to: &head)
            ResponseSerializer.appendField("content-length", "0", to: &head)
        }
        appendTail(age: age, now: now, cacheStatus: cacheStatus, hasDate: entry.header("date") != nil, to: &head)
        connection.enqueue(head)
        if let first, let last {
            if let file, let bodyFile = entry.bodyFile {
                connection.enqueue(file: file, from: bodyFile.offset + first, to: bodyFile.offset + last + 1)
            } else {
                connection.enqueue(entry, from: entry.headLength + first, to: entry.headLength + last + 1)
            }
        }
        complete()
    }

    var hasClientConditional: Bool {
        isCacheLookup && (request.header("if-none-match") != nil || request.header("if-modified-since") != nil)
    }

    func clientIsNotModified(etag: String?, lastModified: String?, dateValue: Int64?) -> Bool {
        guard hasClientConditional else { return false }
        return Validation.clientNotModified(ifNoneMatch: request.combinedHeader("if-none-match"),
                                            ifModifiedSince: request.header("if-modified-since"),
                                            etag: etag, lastModified: lastModified, dateValue: dateValue)
    }

    /// A 304 for the client (RFC 9110 section 15.4.5): the fields a 200 would
    /// have had that describe the representation, no body.
    func sendNotModified(_ headers: HeaderFields, age: Int, now: Int64, cacheStatus: [UInt8]) {
        var head = Array("HTTP/1.1 304 Not Modified\r\n".utf8)
        var hasDate = false
        for field in headers {
            switch field.name {
            case "cache-control", "content-location", "date", "etag", "expires", "vary", "last-modified":
                if field.name.isField("date") { hasDate = true }
                ResponseSerializer.appendField(field.name, field.value, to: &head)
            default: continue
            }
        }
        appendTail(age: age, now: now, cacheStatus: cacheStatus, hasDate: hasDate, to: &head)
        connection.enqueue(head)
    }

    /// Age, Date (only when the fields have none), Cache-Status, Connection
    /// and the blank line ending the head.
    func appendTail(age: Int, now: Int64, cacheStatus: [UInt8], hasDate: Bool, to head: inout [UInt8]) {
        head.append(contentsOf: "Age: ".utf8)
        ResponseSerializer.appendDecimal(age, to: &head)
        head.append(contentsOf: [0x0D, 0x0A])
        if !hasDate { head.append(contentsOf: worker.dateHeader.current(now: now)) }
        head.append(contentsOf: cacheStatus)
        appendConnectionField(to: &head)
        head.append(contentsOf: [0x0D, 0x0A])
    }

    func appendConnectionField(to out: inout [UInt8]) {
        if !keepAlive {
            out.append(contentsOf: "Connection: close\r\n".utf8)
        } else if request.minorVersion == 0 {
            out.append(contentsOf: "Connection: keep-alive\r\n".utf8)
        }
    }
}
