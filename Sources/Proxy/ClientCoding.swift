import CacheSemantics
import CacheStorage
import Compression
import HTTP1

/// A stored gzip body for a client that does not take gzip (RFC 9110
/// section 12.5.3; Varnish does the same): the client gets it decoded, as
/// if the decoded response were stored, so a HEAD, a Range and a
/// conditional request all see the decoded body (weak ETag, no
/// Content-Encoding, its own Content-Length). One stored copy serves every
/// client (`AcceptEncoding.variantKey` puts them in one variant).
enum ClientCoding {
    /// What one decoding may produce: beyond it the stored copy is not
    /// used for this client (the request goes upstream as on a miss).
    static let maxDecodedBytes = 64 << 20

    /// Whether `request`'s client must get `entry` decoded. A hit on an
    /// uncompressed entry pays one flag test.
    @inline(__always)
    static func mustDecode(_ entry: CachedResponse, for request: RequestHead) -> Bool {
        entry.isGzip && !AcceptEncoding.takesGzip(request.combinedHeader("accept-encoding"))
    }

    /// The decoded copy; nil when the body cannot be read, is not valid
    /// gzip, or decodes to more than `maxDecodedBytes`.
    static func decoded(_ entry: CachedResponse) -> CachedResponse? {
        guard entry.bodyLength > 0 else { return entry.decoded(body: UnsafeRawBufferPointer(start: nil, count: 0)) }
        var decodedBody: [UInt8]
        do {
            if let file = entry.bodyFile {
                guard let bytes = file.readWhole() else { return nil }
                decodedBody = try bytes.withUnsafeBytes { try Gzip.decompress($0, limit: maxDecodedBytes) }
            } else {
                decodedBody = try Gzip.decompress(entry.body, limit: maxDecodedBytes)
            }
        } catch {
            return nil
        }
        return decodedBody.withUnsafeBytes { entry.decoded(body: $0) }
    }
}
