import CacheStorage

/// Answers from the store: a hit, a 304 to the client's conditional, a
/// 206/416 for a range (queued by `ClientConnection.sendStored`).
extension Exchange {
    /// Returns false, having sent nothing, when the body is a disk file that
    /// can no longer be opened.
    @discardableResult
    func serveStored(_ entry: CachedResponse, age: Int, now: Int64, cacheStatus: [UInt8]) -> Bool {
        guard let sent = connection.sendStored(entry, for: request, age: age, now: now, cacheStatus: cacheStatus,
                                               connection: connectionField) else { return false }
        noteAnswer(sent.status, cache: cacheStatus, bodyBytes: sent.bodyBytes)
        complete()
        return true
    }

    var connectionField: ConnectionField { ConnectionField(keepAlive: keepAlive, minorVersion: request.minorVersion) }
}
