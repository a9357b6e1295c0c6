/// The content coding a stored body is in, as far as Larder can decode it
/// for a client that does not take it (RFC 9110 section 8.4.1): gzip, zstd
/// (RFC 8878) or brotli (RFC 7932), alone; anything else (none, deflate,
/// several codings) is `none` here and reaches only clients that take it.
public enum StoredCoding: UInt8, Sendable, Equatable {
    case none = 0, gzip = 1, zstd = 2, br = 3

    /// A response's Content-Encoding read (nil: no field).
    public static func of(_ contentEncoding: String?) -> StoredCoding {
        guard let coding = contentEncoding.map({ Substring($0).trimmingWhitespace().lowercased() }) else { return .none }
        switch coding {
        case "gzip", "x-gzip": return .gzip
        case "zstd": return .zstd
        case "br": return .br
        default: return .none
        }
    }

    /// Its Content-Encoding token ("" for none).
    public var token: String {
        switch self {
        case .none: return ""
        case .gzip: return "gzip"
        case .zstd: return "zstd"
        case .br: return "br"
        }
    }
}
