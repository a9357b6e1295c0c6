import HTTP1
import HTTPHeaders
import Telemetry

/// The admin API as a handler of HTTP/1.1 requests (served by the proxy's
/// HTTP/1.1 transport on the admin thread's loop): a request head in, a
/// response's bytes out. Bodies are not read: every admin request is its
/// method and target.
extension AdminAPI {
    /// Admin requests carry no meaningful body; this bounds what is read.
    public static let maxBodyBytes = 64 * 1024
    /// How long an admin connection may wait for its first request, and
    /// stay idle once it was answered (an unauthorized answer closes it).
    public static let firstRequestTimeoutMilliseconds: UInt64 = 5_000
    public static let idleTimeoutMilliseconds: UInt64 = 30_000

    /// The answer to `head` (from `peer`): refused when it is cross-site or
    /// rebinding (`requestGuard`), or when it sends a chunked body; else
    /// `handle`'s. A refusal for a missing or wrong token is counted
    /// (`admin_failed_sign_ins`) and logged, at most once every 10 s with
    /// how many there were (`FaultSummary`).
    public func answer(_ head: RequestHead, peer: String = "") -> Response {
        let response = answering(head)
        if response.status == 401 {
            stats.adminFailedSignIns.wrappingAdd(1, ordering: .relaxed)
            let path = head.target.prefix { $0 != "?" }
            if let line = FaultSummary.shared.note("admin: refused a request with a missing or wrong token (401)",
                                                   example: "\(head.method) \(path) from \(peer)") {
                (warn ?? log)(line)
            }
        }
        return response
    }

    private func answering(_ head: RequestHead) -> Response {
        if case .chunked = head.framing {
            return .error(411, "admin requests take no body; send Content-Length or none")
        }
        if let refusal = requestGuard.refusal(method: head.method, host: head.header("host"), origin: head.header("origin"),
                                              fetchSite: head.header("sec-fetch-site"), contentType: head.header("content-type"),
                                              tokenRequired: token != nil) {
            return .error(403, refusal)
        }
        return handle(method: head.method, target: head.target, authorization: head.header("authorization"),
                      cookie: head.header("cookie"))
    }

    /// A connection refused past admin_max_connections, counted.
    public func refusedConnection() { stats.adminRefusedConnections.wrappingAdd(1, ordering: .relaxed) }

    /// What a connection refused past admin_max_connections is sent.
    public static let busy = ResponseSerializer.simple(status: 503, body: "too many admin connections; retry", close: true,
                                                       extra: ["retry-after": "1"])
}

extension AdminAPI.Response {
    /// Its bytes (`head`: a HEAD's answer, without the body; `close`: the
    /// connection ends after it).
    public func serialized(close: Bool, head: Bool) -> [UInt8] {
        var out: [UInt8] = []
        ResponseSerializer.appendStatusLine(status, reason: nil, to: &out)
        ResponseSerializer.appendField("content-type", contentType, to: &out)
        ResponseSerializer.appendField("content-length", String(body.utf8.count), to: &out)
        ResponseSerializer.appendField("cache-control", "no-store", to: &out)
        for field in extraHeaders { ResponseSerializer.appendField(field.name, field.value, to: &out) }
        if close { ResponseSerializer.appendField("connection", "close", to: &out) }
        out.append(contentsOf: [0x0D, 0x0A])
        if !head { out.append(contentsOf: body.utf8) }
        return out
    }
}
