import CacheSemantics
import CacheStorage
import Compression
import HTTPHeaders
import Threads

/// `compress`: an uncompressed response of a listed type is stored encoded
/// (gzip, or zstd or br with `compress_codec`), so the tiers hold several
/// times more text; clients that take the coding get the stored bytes, the
/// others get them decoded (`ClientCoding`). Pure decisions, applied where
/// a response is stored (`PendingStore`): it is stored as it came, and its
/// encoded copy, made on an I/O thread, takes its place a moment later
/// (`storeCompressed`).
enum StoredCompression {
    /// Whether a response may be stored compressed: a listed type, no
    /// content coding already, a whole body (not a 206 or a body-less
    /// status), and no `no-transform` (RFC 9110 section 7.7: an
    /// intermediary must not change the content then).
    static func applies(status: Int, headers: HeaderFields, cc: CacheControl, types: MediaTypePatterns) -> Bool {
        guard !types.isEmpty, !cc.noTransform, status != 206, status != 204, status != 304, status >= 200 else { return false }
        if let coding = headers.combined("content-encoding").map({ Substring($0).trimmingWhitespace().lowercased() }),
           !coding.isEmpty, coding != "identity" { return false }
        if headers.contains("content-range") { return false }
        return types.matches(contentType: headers["content-type"])
    }

    /// The fields of the compressed copy: its Content-Encoding, the ETag
    /// made weak (the bytes differ from what a strong tag names, RFC 9110
    /// section 8.8.1; Varnish does the same) and Vary: Accept-Encoding
    /// added, for caches further down (Larder itself serves the one copy
    /// to every client, so it does not select on it).
    static func fields(_ headers: HeaderFields, codec: Codec = .gzip) -> HeaderFields {
        var result: HeaderFields = []
        var varies = false
        for field in headers where !field.name.isField("content-encoding") {
            if field.name.isField("etag"), !field.value.hasPrefix("W/") {
                result.append(HeaderField(name: field.name, value: "W/" + field.value))
                continue
            }
            if field.name.isField("vary") {
                varies = varies || field.value.split(separator: ",").contains {
                    let name = $0.trimmingWhitespace().lowercased()
                    return name == "accept-encoding" || name == "*"
                }
            }
            result.append(field)
        }
        result.append(HeaderField(name: "content-encoding", value: codec.token))
        if !varies { result.append(HeaderField(name: "vary", value: "Accept-Encoding")) }
        return result
    }

    /// A 304 refreshing a copy stored compressed repeats the origin's
    /// strong ETag: the stored copy keeps it weak.
    static func keepWeak(stored: String?, merged: HeaderFields) -> HeaderFields {
        guard let stored, stored.hasPrefix("W/"), let tag = merged["etag"], !tag.hasPrefix("W/"),
              stored.dropFirst(2) == tag else { return merged }
        return HeaderFields(merged.map { $0.name.isField("etag") ? HeaderField(name: $0.name, value: stored) : $0 })
    }
}

extension CacheAccess {
    /// The encoded copy of `stored` (a `compress` type, stored as it came a
    /// moment ago), made on an I/O thread, takes its place when smaller
    /// and when it is still the copy stored (not one stored since, nor
    /// purged: it is stored through the fetch's miss handler).
    func storeCompressed(_ stored: CachedResponse, as head: StoredHead, through handler: MissHandler) {
        let stored = stored.owned()  // (read on another thread)
        let codec = builder.compressCodec
        BlockingWork.shared.run({ codec.compress(stored.body) }, on: loop) { [store] compressed in
            guard compressed.count < stored.body.count,
                  store.lookupWithoutBlocking(stored.key)?.contains(where: { $0.isSame(stored) }) ?? false else { return }
            let entry = compressed.withUnsafeBytes { CachedResponse.make(head: head, body: $0) }
            handler.insert(entry)
        }
    }
}
