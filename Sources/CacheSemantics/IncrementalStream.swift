/// Responses meant to be read as they arrive: `Incremental: ?1` (RFC
/// 10036, a Boolean structured field: RFC 8941 section 3.3.6) and Server-Sent
/// Events (`text/event-stream`). Larder passes their pieces on at once and
/// never stores them: a live stream is not a representation to reuse, and
/// one that never ends would only grow until it is abandoned.
public enum IncrementalStream {
    /// Whether `Incremental` says `?1` (parameters allowed; anything that
    /// does not parse as a Boolean item, `?0` included, is false).
    public static func isIncremental(_ value: String?) -> Bool {
        guard let value else { return false }
        let trimmed = Substring(value).trimmingWhitespace()
        guard trimmed.hasPrefix("?1") else { return false }
        let rest = trimmed.dropFirst(2)
        return rest.isEmpty || rest.first == ";"
    }

    /// Whether a response with these fields is such a stream.
    public static func applies(incremental: String?, contentType: String?) -> Bool {
        if isIncremental(incremental) { return true }
        guard let contentType else { return false }
        return contentType.prefix { $0 != ";" }.trimmingWhitespace().lowercased() == "text/event-stream"
    }
}
