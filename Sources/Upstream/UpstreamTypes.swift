import HTTPHeaders

/// A request to send upstream. The proxy has already removed hop-by-hop
/// fields and added forwarding fields.
public struct UpstreamRequest: Sendable {
    public enum Body: Sendable, Equatable {
        case none
        /// The body will be supplied with `UpstreamTransfer.supply`; nil length
        /// means unknown (sent chunked to an HTTP/1.1 upstream).
        case streamed(length: Int?)
    }

    public var method: String
    public var url: String
    public var headers: HeaderFields
    public var body: Body
    /// Sent instead of the URL's path when set ("*" for OPTIONS *).
    public var requestTarget: String?

    public init(method: String, url: String, headers: HeaderFields, body: Body,
                requestTarget: String? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.requestTarget = requestTarget
    }
}

/// Why an upstream exchange failed; the proxy maps it to 502 or 504.
public enum UpstreamError: Error, Equatable, Sendable {
    /// Could not connect or resolve, TLS failed, connection reset: 502.
    case unreachable(String)
    /// No response (or no progress) within the configured time: 504.
    case timedOut(String)
    /// The upstream sent something that is not HTTP: 502.
    case invalidResponse(String)
    /// Cancelled by us (the client went away).
    case cancelled

    public var message: String {
        switch self {
        case .unreachable(let m), .timedOut(let m), .invalidResponse(let m): return m
        case .cancelled: return "cancelled"
        }
    }
}

/// Timeouts and limits for upstream traffic. Every libcurl timeout is set
/// from these; none is left at libcurl's default.
public struct UpstreamSettings: Sendable {
    /// TCP + TLS connect.
    public var connectTimeoutMilliseconds: Int = 5_000
    /// From sending the request to the end of the response head.
    public var responseTimeoutMilliseconds: Int = 30_000
    /// A body that makes no progress for this long is abandoned.
    public var idleTimeoutSeconds: Int = 60
    /// The whole exchange, head and body (0: no limit; the other timeouts
    /// still bound a stalled upstream).
    public var totalTimeoutMilliseconds: Int = 0
    /// Idle pooled connections older than this are not reused (servers often
    /// close idle keep-alive connections after about two minutes).
    public var maxIdleConnectionAgeSeconds: Int = 60
    /// Connections per upstream host per worker.
    public var maxConnectionsPerHost: Int = 256
    /// Optional CA bundle for https upstreams with a private CA.
    public var caFile: String?
    /// Verify the upstream's TLS certificate (on by default).
    public var verifyTLS: Bool = true

    public init() {}
}

/// Receives one transfer's response as it streams in. Called on the loop thread.
public protocol UpstreamTransferDelegate: AnyObject {
    /// The final response head (after any 1xx); `reason` is the HTTP/1.x
    /// reason phrase (HTTP/2 has none).
    func upstreamDidReceiveHead(status: Int, reason: String?, headers: HeaderFields)
    /// A piece of the body. Return false to leave it unconsumed and pause the
    /// transfer; call `resume()` later and the same bytes come again.
    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// The transfer ended. After this no more calls arrive.
    func upstreamDidComplete(_ error: UpstreamError?)
    /// An interim response (102, 103, ...; not 100 or 101) before the
    /// final head. Its fields are never part of the final head.
    func upstreamDidReceiveInterim(status: Int, headers: HeaderFields)
}

extension UpstreamTransferDelegate {
    public func upstreamDidReceiveInterim(status: Int, headers: HeaderFields) {}
}
