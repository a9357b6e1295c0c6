/// A content coding decoded piece by piece (`GzipDecoder`, `ZstdDecoder`,
/// `BrotliDecoder`): the caller hands in encoded bytes as it has them and
/// room for output, and gets back how much of each was used, so a stored
/// body is decoded as its client drains, never whole.
public protocol ContentDecoder: AnyObject {
    /// The input is over and the coded data ended there.
    var finished: Bool { get }
    /// Decodes from `input` into `output`: how many input bytes were used
    /// and output bytes written. Call again with the rest of the input
    /// (and more) while output fills; `isLast`: `input` reaches the end of
    /// the body, so data that does not end there is cut short. Throws for
    /// data that is not in the coding, corrupt, or cut short.
    func decode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
                isLast: Bool) throws(CodingFailure) -> (consumed: Int, produced: Int)
}

/// Not in the coding, corrupt, or cut short.
public struct CodingFailure: Error, Equatable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// The codings Larder decodes and stores in (`compress_codec`).
public enum Codec: UInt8, Sendable, CaseIterable {
    case gzip = 1, zstd = 2, br = 3

    /// `compress_codec`'s value ("gzip", "zstd", "br").
    public init?(token: String) {
        guard let codec = Self.allCases.first(where: { $0.token == token.lowercased() }) else { return nil }
        self = codec
    }

    /// Its Content-Encoding token.
    public var token: String {
        switch self {
        case .gzip: return "gzip"
        case .zstd: return "zstd"
        case .br: return "br"
        }
    }

    /// A decoder for it; nil when the library cannot start one.
    public func decoder() -> (any ContentDecoder)? {
        switch self {
        case .gzip: return try? GzipDecoder()
        case .zstd: return ZstdDecoder()
        case .br: return BrotliDecoder()
        }
    }

    /// `input` encoded whole (a stored body, bounded by `max_object_size`),
    /// off a worker's loop.
    public func compress(_ input: UnsafeRawBufferPointer) -> [UInt8] {
        switch self {
        case .gzip: return Gzip.compress(input)
        case .zstd: return Zstd.compress(input)
        case .br: return Brotli.compress(input)
        }
    }
}
