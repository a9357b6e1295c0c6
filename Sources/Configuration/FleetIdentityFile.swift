import FoundationEssentials

/// Where a node remembers the fleet's identity (`PurgeFeed.knownFleetID`):
/// a file beside its disk tier holding the fleet's name and identity, so
/// that a restarted node knows whether the Redis it finds still holds the
/// fleet it left, or lost its data meanwhile (then it drops what it holds).
/// Without a disk tier nothing outlives the process: nothing to remember.
public struct FleetIdentityFile {
    public let path: String
    public let name: String

    public init?(cacheDirectory: String?, name: String) {
        guard let cacheDirectory else { return nil }
        path = cacheDirectory + "/fleet-identity"
        self.name = name
    }

    /// The identity remembered for this fleet's name; nil when none (or
    /// one of another fleet).
    public func read() -> String? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count >= 2, lines[0] == name, !lines[1].isEmpty else { return nil }
        return String(lines[1])
    }

    /// Replaces the file in one rename; a failure's text, or nil.
    public func write(_ identity: String) -> String? {
        do {
            try Data("\(name)\n\(identity)\n".utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
            return nil
        } catch {
            return "cannot remember the fleet's identity in \(path): \(error)"
        }
    }
}
