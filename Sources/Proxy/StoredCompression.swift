import CacheSemantics
import HTTPHeaders

/// The media types `compress` names: `type/subtype` or `type/*`, matched
/// case-insensitively against a Content-Type without its parameters.
public struct MediaTypePatterns: Sendable, Equatable {
    /// Lowercased; a `type/*` pattern is kept as `type/`.
    public private(set) var patterns: [String] = []
    public var isEmpty: Bool { patterns.isEmpty }
    /// As a config file writes them (`type/*` for a whole type).
    public var spelled: [String] { patterns.map { $0.hasSuffix("/") ? $0 + "*" : $0 } }

    public init() {}

    /// nil, with the offending entry, when one is not `type/subtype` or
    /// `type/*` made of tokens (RFC 9110 section 8.3.1).
    public static func parse(_ list: [String]) -> Result<MediaTypePatterns, PatternError> {
        var result = MediaTypePatterns()
        for entry in list {
            let parts = entry.lowercased().split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, isToken(parts[0]), parts[0] != "*",
                  parts[1] == "*" || isToken(parts[1]) else { return .failure(PatternError(entry: entry)) }
            result.patterns.append(parts[1] == "*" ? parts[0] + "/" : parts[0] + "/" + parts[1])
        }
        return .success(result)
    }

    public struct PatternError: Error, Equatable {
        public let entry: String
    }

    private static func isToken(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }

    /// Whether a Content-Type value is one of the patterns' types.
    public func matches(contentType: String?) -> Bool {
        guard !patterns.isEmpty, let contentType else { return false }
        let type = trimmed(contentType.prefix { $0 != ";" }).lowercased()
        return patterns.contains { $0.hasSuffix("/") ? type.hasPrefix($0) && type.utf8.count > $0.utf8.count : type == $0 }
    }
}

/// `compress`: an uncompressed response of a listed type is stored gzip
/// encoded, so the tiers hold several times more text; clients that take
/// gzip get the stored bytes, the others get them decoded (`ClientCoding`).
/// Pure decisions, applied where a response is stored (`PendingStore`).
enum StoredCompression {
    /// Whether a response may be stored compressed: a listed type, no
    /// content coding already, a whole body (not a 206 or a body-less
    /// status), and no `no-transform` (RFC 9110 section 7.7: an
    /// intermediary must not change the content then).
    static func applies(status: Int, headers: HeaderFields, cc: CacheControl, types: MediaTypePatterns) -> Bool {
        guard !types.isEmpty, !cc.noTransform, status != 206, status != 204, status != 304, status >= 200 else { return false }
        if let coding = headers.combined("content-encoding").map({ trimmed(Substring($0)).lowercased() }),
           !coding.isEmpty, coding != "identity" { return false }
        if headers.contains("content-range") { return false }
        return types.matches(contentType: headers["content-type"])
    }

    /// The fields of the compressed copy: Content-Encoding gzip, the ETag
    /// made weak (the bytes differ from what a strong tag names, RFC 9110
    /// section 8.8.1; Varnish does the same) and Vary: Accept-Encoding
    /// added, for caches further down (Larder itself serves the one copy
    /// to every client, so it does not select on it).
    static func fields(_ headers: HeaderFields) -> HeaderFields {
        var result: HeaderFields = []
        var varies = false
        for field in headers where !field.name.isField("content-encoding") {
            if field.name.isField("etag"), !field.value.hasPrefix("W/") {
                result.append(HeaderField(name: field.name, value: "W/" + field.value))
                continue
            }
            if field.name.isField("vary") {
                varies = varies || field.value.split(separator: ",").contains {
                    let name = trimmed($0).lowercased()
                    return name == "accept-encoding" || name == "*"
                }
            }
            result.append(field)
        }
        result.append(HeaderField(name: "content-encoding", value: "gzip"))
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

/// Without spaces and tabs around it.
private func trimmed(_ text: Substring) -> String {
    var s = text
    while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
    while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
    return String(s)
}
