import CacheStorage

/// Sharing a fetch with the requests collapsed onto it (`Collapser`):
/// offered once the response is known storable, published with the body
/// so far once some request waits.
extension UpstreamFetch {
    /// Offers the response to collapsed requests once it is known storable
    /// (published at once when some already wait).
    func offerToShare() {
        guard canShare, request.method == "GET" || (request.method == "POST" || request.method == "QUERY") && isCacheLookup else { return }
        if cache.lock.offer(key, loop: upstream.loop, share: { [weak self] in self?.shareRequested() }) { share() }
    }

    /// Still leading, not yet shared, and the body so far is in memory.
    private var canShare: Bool {
        guard sharing, machine.mayPublish, let pending = store else { return false }
        return !pending.isStreaming
    }

    /// A request now waits for this key (on this loop): share if still possible.
    private func shareRequested() {
        if canShare { share() }
    }

    /// Publishes the response with the body received so far.
    private func share() {
        guard let pending = store else { return }
        let head = SharedFetch.head(of: pending.response, varyNames: cache.builder.variantFields(pending.response.fields, key: key),
                                    leader: request)
        let fetch = SharedFetch(head: head, limitBytes: 2 * max(upstream.configuration.maxObjectBytes, 1 << 20))
        let soFar = pending.collected
        if soFar.count > 0 { fetch.append(Bytes(soFar)) }
        guard case .publish = machine.publish(fetch) else { return }
        cache.lock.publish(key, fetch)
    }
}
