import Configuration
import FoundationEssentials

/// The admin API's `/top` for `larder top`: the last minute's URLs by
/// requests and by misses, and prefixes.
public struct TopURLs: Equatable {
    public struct Row: Equatable {
        var name: String
        var requests: Int
        var misses: Int
    }

    public var byRequests: [Row] = []
    public var byMisses: [Row] = []
    public var prefixes: [Row] = []

    /// nil when `body` is not `/top`'s answer (an older node: no such endpoint).
    public init?(json body: String) {
        guard let object = JSONValue.parse(body), let byRequests = object["by_requests"]?.array else { return nil }
        func rows(_ list: [JSONValue]?, _ key: String) -> [Row] {
            (list ?? []).compactMap { item in
                guard let name = item[key]?.string else { return nil }
                return Row(name: name, requests: item["requests"]?.int ?? 0, misses: item["misses"]?.int ?? 0)
            }
        }
        self.byRequests = rows(byRequests, "target")
        self.byMisses = rows(object["by_misses"]?.array, "target")
        self.prefixes = rows(object["prefixes"]?.array, "prefix")
    }

    public init(byRequests: [Row], byMisses: [Row], prefixes: [Row]) {
        (self.byRequests, self.byMisses, self.prefixes) = (byRequests, byMisses, prefixes)
    }

    /// The screen's part: two columns of figures, then the URL.
    public var lines: [String] {
        func table(_ title: String, _ rows: [Row]) -> [String] {
            ["", title, "  " + Self.pad("requests", 9) + Self.pad("misses", 8) + "  URL"]
                + (rows.isEmpty ? ["  (none yet)"] : rows.map { "  " + Self.pad(String($0.requests), 9) + Self.pad(String($0.misses), 8) + "  " + $0.name })
        }
        var out = table("top URLs, last minute", byRequests)
        out += table("top misses, last minute", byMisses)
        out.append("")
        out.append("prefixes     " + (prefixes.isEmpty ? "(none yet)" : prefixes.map { "\($0.name) \($0.requests)" }.joined(separator: "  ")))
        return out
    }

    private static func pad(_ text: String, _ width: Int) -> String {
         String(repeating: " ", count: max(0, width - text.count)) + text
    }
}
