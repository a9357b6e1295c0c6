import CacheSemantics
import CacheStorage
import Compression
import HTTP1
import HTTPHeaders

/// A stored gzip, zstd or brotli body for a client that does not take its
/// coding (RFC 9110 section 12.5.3; Varnish does the same for gzip): the
/// client gets it decoded, as if the decoded response were stored, so a
/// HEAD, a Range and a conditional request all see the decoded
/// representation (weak ETag, no Content-Encoding, its own Content-Length:
/// the size the gzip trailer or the zstd frame declares, or that decoding
/// it once measured, checked as the body decodes). One stored copy serves
/// every client (`AcceptEncoding.variantKey` puts them in one variant). The
/// body is decoded as the client drains, in bounded pieces (`DecodingBody`).
enum ClientCoding {

    /// Whether `request`'s client must get `entry` decoded. A hit on an
    /// uncompressed entry pays one flag test.
    @inline(__always)
    static func mustDecode(_ entry: CachedResponse, for request: RequestHead) -> Bool {
        entry.coding != .none && !AcceptEncoding.takes(entry.coding, request.combinedHeader("accept-encoding"))
    }

    /// The bytes at a gzip body's end read for its declared size (the
    /// smallest gzip member is this long); as many at a zstd body's start
    /// hold its frame header.
    static let trailerBytes = 18

    /// The decoded representation's length: what its gzip trailer declares
    /// (a stored body is one member: Larder's own compression, or an
    /// origin's; decoded piece by piece, its size is not bounded, as a
    /// stored file's is not) or its zstd frame header, read through
    /// `reader`; else what decoding it whole once measured
    /// (`DecodedLengths`). `none` when nothing says it (a gzip body without
    /// a trailer, one that does not decode or decodes to more than
    /// `DecodedLengths.limit`); `cold` when, asked to read the page cache
    /// only (`cachedOnly`), what says it is not there, or it must be
    /// measured (that is done where reading may wait).
    enum Declared: Equatable { case length(Int), none, cold }

    static func declaredLength(of entry: CachedResponse, reading reader: StoredBodyReader, cachedOnly: Bool = false) -> Declared {
        if reader.count == 0 { return .length(0) }
        if entry.coding != .gzip {
            if entry.coding == .zstd, let declared = zstdDeclared(reading: reader, cachedOnly: cachedOnly) { return declared }
            if let measured = DecodedLengths.shared.length(of: entry) { return measured.map { .length($0) } ?? .none }
            if cachedOnly { return .cold }
            return DecodedLengths.shared.measure(entry, reading: reader).map { .length($0) } ?? .none
        }
        guard reader.count >= trailerBytes else { return .none }
        var trailer = [UInt8](repeating: 0, count: trailerBytes)
        let at = reader.count - trailerBytes
        let read = trailer.withUnsafeMutableBytes { buffer -> StoredBodyReader.CachedRead in
            guard cachedOnly else { return reader.read(from: at, into: buffer).map { .read($0) } ?? .failed }
            return reader.readCached(from: at, into: buffer)
        }
        if read == .wouldBlock { return .cold }
        guard read == .read(trailerBytes) else { return .none }
        return trailer.withUnsafeBytes { Gzip.declaredSize($0) }.map { .length($0) } ?? .none
    }

    /// What a zstd body's frame header declares; nil when it does not say.
    private static func zstdDeclared(reading reader: StoredBodyReader, cachedOnly: Bool) -> Declared? {
        var head = [UInt8](repeating: 0, count: min(trailerBytes, reader.count))
        let read = head.withUnsafeMutableBytes { buffer -> StoredBodyReader.CachedRead in
            guard cachedOnly else { return reader.read(from: 0, into: buffer).map { .read($0) } ?? .failed }
            return reader.readCached(from: 0, into: buffer)
        }
        if read == .wouldBlock { return .cold }
        guard case .read(let n) = read, n > 0 else { return nil }
        return head.withUnsafeBytes { Zstd.declaredSize(UnsafeRawBufferPointer(rebasing: $0[..<n])) }.map { .length($0) }
    }

    /// The decoded representation's fields: the stored ones but
    /// Content-Encoding, with the ETag weak (the decoded bytes are not what
    /// a strong tag names).
    static func decodedFields(_ entry: CachedResponse) -> HeaderFields {
        var fields = HeaderFields()
        for field in entry.headers where field.name != "content-encoding" && field.name != "content-length" {
            let weak = field.name == "etag" && !field.value.hasPrefix("W/")
            fields.append(field.name, weak ? "W/" + field.value : field.value)
        }
        return fields
    }

    /// What a request gets of the decoded representation (`length` bytes,
    /// `fields`): 304, whole, a range, or 416, as for a stored one.
    static func answer(for request: RequestHead, entry: CachedResponse, fields: HeaderFields, length: Int) -> StoredAnswer {
        StoredAnswer.choose(for: request, status: entry.status, length: length, etag: fields["etag"],
                            lastModified: fields["last-modified"],
                            dateValue: entry.timing.dateValue ?? entry.timing.responseTime)
    }
}
