import Configuration
import FoundationEssentials
import Logging

/// Log lines for journald (when JOURNAL_STREAM is set, i.e. stderr is
/// connected to the journal): no timestamp (the journal adds one), and a
/// syslog priority prefix `<N>` that journald turns into the entry's
/// priority, so `journalctl -p warning` works.
struct JournalLogHandler: LogHandler {
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    private let label: String

    init(label: String) { self.label = label }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    func log(event: LogEvent) {
        var all = metadata
        if let explicit = event.metadata { all.merge(explicit) { _, new in new } }
        let extra = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        // One write per line, newlines inside the message flattened (one entry each).
        let text = "\(event.message)\(extra)".replacing("\n", with: " ")
        writeToStandardError("<\(Self.priority(event.level))>\(label): \(text)\n")
    }

    /// Whether stderr goes to the journal.
    static var isJournal: Bool { environmentValue("JOURNAL_STREAM")?.isEmpty == false }
}
