import CacheStorage
import EventLoop
import HTTP1

/// Answers from the store (a hit, a 304 to the client's conditional, a
/// 206/416 for a range): `StoredAnswer` chooses, `ClientHead` writes the
/// head, this queues it with the body.
extension Exchange {
    /// Returns false, having sent nothing, when the body is a disk file that
    /// can no longer be opened.
    @discardableResult
    func serveStored(_ entry: CachedResponse, age: Int, now: Int64, cacheStatus: [UInt8]) -> Bool {
        let answer = StoredAnswer.choose(for: request, entry: entry)
        var tail: ClientHead.Tail {
            ClientHead.Tail(age: age, dateLine: worker.dateHeader.current(now: now), cacheStatus: cacheStatus, connection: connectionField)
        }
        var file: OpenFile?
        if let bodyFile = entry.bodyFile, answer != .unsatisfiable, answer != .notModified, request.method != "HEAD" {
            guard let opened = openBody(bodyFile) else { return false }
            file = opened
        }
        switch answer {
        case .notModified:
            noteAnswer(304, cache: cacheStatus, bodyBytes: 0)
            connection.enqueue(ClientHead.notModified(fields: entry.headers, tail: tail))
        case .partial(let range):
            noteAnswer(206, cache: cacheStatus, bodyBytes: range.count)
            connection.enqueue(ClientHead.partial(fields: entry.headers, range: range, length: entry.bodyLength, tail: tail,
                                                  isHidden: builder.isHidden))
            if let file, let bodyFile = entry.bodyFile {
                connection.enqueue(file: file, from: bodyFile.offset + range.lowerBound, to: bodyFile.offset + range.upperBound + 1)
            } else {
                connection.enqueue(entry, from: entry.headLength + range.lowerBound, to: entry.headLength + range.upperBound + 1)
            }
        case .unsatisfiable:
            noteAnswer(416, cache: cacheStatus, bodyBytes: 0)
            connection.enqueue(ClientHead.partial(fields: entry.headers, range: nil, length: entry.bodyLength, tail: tail,
                                                  isHidden: builder.isHidden))
        case .whole:
            if worker.accessLog != nil {
                noteAnswer(entry.status, cache: cacheStatus, bodyBytes: request.method == "HEAD" ? 0 : entry.bodyLength)
            }
            // The stored head as is, then the per-request tail from a buffer the worker reuses.
            worker.headScratch.removeAll(keepingCapacity: true)
            ClientHead.appendHitTail(age: age, cacheStatus: cacheStatus, connection: connectionField, to: &worker.headScratch)
            let headLength = entry.headLength
            connection.enqueue(entry, from: 0, to: headLength)
            worker.headScratch.withUnsafeBytes { connection.enqueue(copying: $0) }
            if let file, let bodyFile = entry.bodyFile {
                connection.enqueue(file: file, from: bodyFile.offset, to: bodyFile.offset + bodyFile.length)
            } else if request.method != "HEAD" {
                connection.enqueue(entry, from: headLength, to: headLength + entry.bodyLength)
            }
        }
        complete()
        return true
    }

    /// The body file of a stored response, or nil when it is gone or was
    /// cut short behind Larder's back (sent as is, every hit would be a
    /// short body and a cut connection).
    private func openBody(_ bodyFile: FileBody) -> OpenFile? {
        guard let fd = try? Socket.openForReading(bodyFile.path) else { return nil }
        let file = OpenFile(fd: fd)
        if let size = Socket.fileSize(fd), size < bodyFile.offset + bodyFile.length {
            worker.logger.warning("stored body \(bodyFile.path) is \(size) bytes, shorter than recorded (\(bodyFile.offset + bodyFile.length)): entry dropped, fetching \(key) again")
            return nil
        }
        return file
    }

    var connectionField: ConnectionField { ConnectionField(keepAlive: keepAlive, minorVersion: request.minorVersion) }
}
