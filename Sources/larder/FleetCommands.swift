import ArgumentParser
import Foundation

/// `larder fleet ...`: the running node's view of its fleet.
struct FleetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet", abstract: "The running node's fleet (README \"Running a fleet\").",
        subcommands: [FleetStatusCommand.self])
}

struct FleetStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Print the node's fleet figures from the admin API; exit 1 when it is not connected to the fleet's Redis.")

    @OptionGroup var adminOptions: AdminOptions

    @Flag(help: "Print the /stats fleet section as JSON.")
    var json = false

    func run() throws {
        let (status, body) = try adminOptions.send(method: "GET", pathAndQuery: "/stats")
        guard status == 200, let stats = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else {
            complain("stats failed (\(status)): \(body.trimmingCharacters(in: .whitespacesAndNewlines))")
            throw Exit.failure
        }
        guard let fleet = stats["fleet"] as? [String: Any] else {
            complain("this node is not in a fleet (no [fleet] table in its configuration)")
            throw Exit.failure
        }
        if json {
            let data = try JSONSerialization.data(withJSONObject: fleet, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(Self.describe(fleet))
        }
        if fleet["connected"] as? Bool != true { throw Exit.failure }
    }

    /// The section as a few lines for a person.
    static func describe(_ f: [String: Any]) -> String {
        func n(_ key: String) -> Int { f[key] as? Int ?? 0 }
        let connected = f["connected"] as? Bool == true
        let rtt = (f["redis_rtt_ms"] as? Double).map { String(format: "%.2f ms", $0) } ?? "unknown"
        return """
            fleet \(f["name"] as? String ?? "?"), node \(f["node"] as? String ?? "?"): \
            \(connected ? "connected" : "NOT connected") to Redis (round trip \(rtt)), \(n("nodes")) live nodes
            purges: sent \(n("purges_sent")), received \(n("purges_received")), replayed \(n("purges_replayed")), \
            queued \(n("purges_queued"))
            shared tier: \(n("shared_connections")) workers connected, lookups \(n("shared_lookups")), \
            found \(n("shared_hits")), stored \(n("shared_stores")) (refused \(n("shared_stores_refused"))), \
            errors \(n("shared_errors"))
            last error: \(f["last_error"] as? String ?? "none")
            """
    }
}
