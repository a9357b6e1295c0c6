/// Why a request cannot be served, with the status code docs/limits-and-errors.md's "Errors" table assigns.
public enum HTTPError: Error, Equatable, Sendable {
    /// Malformed request line, header or framing: 400, connection closed.
    case badRequest(String)
    /// The request target is longer than the limit: 414.
    case uriTooLong
    /// The header section is larger than the limit: 431.
    case headerFieldsTooLarge
    /// The declared or received body is over the limit: 413.
    case contentTooLarge
    /// A transfer coding other than chunked: 501.
    case unsupportedTransferCoding(String)
    /// An HTTP version other than 1.0 / 1.1: 505.
    case versionNotSupported

    public var status: Int {
        switch self {
        case .badRequest: return 400
        case .uriTooLong: return 414
        case .headerFieldsTooLarge: return 431
        case .contentTooLarge: return 413
        case .unsupportedTransferCoding: return 501
        case .versionNotSupported: return 505
        }
    }

    /// A one-line explanation for the response body.
    public var message: String {
        switch self {
        case .badRequest(let why): return "bad request: \(why)"
        case .uriTooLong: return "request target too long"
        case .headerFieldsTooLarge: return "request header section too large"
        case .contentTooLarge: return "request body too large"
        case .unsupportedTransferCoding(let what): return "not implemented: \(what)"
        case .versionNotSupported: return "HTTP version not supported"
        }
    }
}
