import HTTPHeaders

/// Going upstream: the fetch carries the request (and its body, held or
/// streamed: `UpstreamFetch`).
extension Exchange {
    /// `leading`: this request holds the key's claim (Collapser), which
    /// the fetch keeps.
    func forward(leading: Bool = false) {
        machine.forward()
        let forwarded = UpstreamHeaders.forward(request, peer: connection.peer, forwardHost: worker.configuration.forwardHost,
                                                passed: worker.configuration.passRequestHeaders)
        let fetch = UpstreamFetch(fields: forwarding.upstreamFields(forwarded, among: variants), for: self, worker: worker,
                                  leading: leading)
        self.fetch = fetch
        fetch.start()
    }

    func requestBody(_ bytes: UnsafeRawBufferPointer) { fetch?.requestBody(bytes) }

    func requestBodyEnd() { fetch?.requestBodyEnd() }

    func requestBodyDrained() { connection.uploadDrained() }

    /// The connection stops reading the client's body meanwhile.
    var isUploadCongested: Bool { fetch?.isUploadCongested ?? false }
}
