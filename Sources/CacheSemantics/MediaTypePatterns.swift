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
        let type = contentType.prefix { $0 != ";" }.trimmingWhitespace().lowercased()
        return patterns.contains { $0.hasSuffix("/") ? type.hasPrefix($0) && type.utf8.count > $0.utf8.count : type == $0 }
    }
}
