import CacheSemantics
import CacheStorage
import HTTP1

/// Turns an upstream response into a `CachedResponse`: the storage decision,
/// the freshness lifetime, and the head prefix serialized once.
enum StoredResponseBuilder {
    /// Header fields never stored in the head prefix: per-request fields
    /// (filled in on every hit) and framing.
    private static let perRequestFields: Set<String> = [
        "date", "age", "content-length", "transfer-encoding", "connection", "keep-alive", "cache-status",
    ]

    /// The freshness lifetime: explicit (section 4.2.1) or heuristic (4.2.2).
    static func lifetime(status: Int, headers: [(name: String, value: String)], cacheControl: CacheControl,
                         timing: ResponseTiming, shared: Bool) -> Int? {
        Freshness.lifetime(cacheControl, dateValue: timing.dateValue, expires: value("expires", in: headers),
                           responseTime: timing.responseTime, shared: shared)
            ?? (cacheControl.noCache ? nil : Freshness.heuristicLifetime(
                status: status, cacheControl, lastModified: value("last-modified", in: headers),
                dateValue: timing.dateValue, responseTime: timing.responseTime))
    }

    /// Whether a response to `request` may be stored (RFC 9111 section 3).
    static func decide(request: RequestHead, status: Int, headers: [(name: String, value: String)],
                       timing: ResponseTiming, shared: Bool) -> StoreDecision {
        let cc = CacheControl(combined("cache-control", in: headers))
        let hasValidator = value("etag", in: headers) != nil || value("last-modified", in: headers) != nil
        let reusable = lifetime(status: status, headers: headers, cacheControl: cc, timing: timing, shared: shared) != nil
            || hasValidator || cc.noCache
        if Vary.fieldNames(combined("vary", in: headers)) == nil { return .doNotStore("Vary: *") }
        return Storability.decide(method: request.method, status: status,
                                  request: CacheControl(request.combinedHeader("cache-control")), response: cc,
                                  hasAuthorization: request.header("authorization") != nil, shared: shared,
                                  reusable: reusable)
    }

    /// Builds the stored form. `varyFrom` supplies the request's values of
    /// the fields the response's Vary names.
    static func build(key: String, status: Int, headers: [(name: String, value: String)], body: Bytes,
                      timing: ResponseTiming, shared: Bool, varyFrom request: (String) -> String?) -> CachedResponse {
        let cc = CacheControl(combined("cache-control", in: headers))
        // A shared cache keeps private="field" fields out of storage (section 5.2.2.7).
        let dropped = shared ? Set(cc.privateFields) : []
        let kept = headers.filter { !dropped.contains($0.name) }
        var prefixFields: [HeaderField] = []
        for field in kept where !perRequestFields.contains(field.name) {
            prefixFields.append(HeaderField(name: field.name, value: field.value))
        }
        var prefix = ResponseSerializer.headPrefix(status: status, headers: prefixFields)
        if status != 204 && status != 304 {
            ResponseSerializer.appendField("content-length", String(body.count), to: &prefix)
        }
        let names = Vary.fieldNames(combined("vary", in: headers)) ?? []
        return CachedResponse(key: key, status: status, headPrefix: Bytes(prefix), body: body, headers: kept,
                              timing: timing,
                              lifetime: lifetime(status: status, headers: kept, cacheControl: cc, timing: timing, shared: shared) ?? 0,
                              cacheControl: cc, varyNames: names, varyValues: names.map { Vary.normalize(request($0)) })
    }

    /// A stored response refreshed by a 304 (or HEAD) response (section 4.3.4):
    /// merged header fields, the new response's timing, the same body.
    static func refresh(_ entry: CachedResponse, with update: [(name: String, value: String)], timing: ResponseTiming,
                        shared: Bool) -> CachedResponse {
        let merged = Validation.merge(stored: entry.headers, update: update)
        let values = entry.varyValues
        let names = entry.varyNames
        let refreshed = build(key: entry.key, status: entry.status, headers: merged, body: entry.body, timing: timing,
                              shared: shared) { name in names.firstIndex(of: name).flatMap { values[$0] } }
        return refreshed
    }

    static func value(_ name: String, in headers: [(name: String, value: String)]) -> String? {
        headers.first { $0.name == name }?.value
    }

    static func combined(_ name: String, in headers: [(name: String, value: String)]) -> String? {
        let values = headers.filter { $0.name == name }.map(\.value)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }
}
