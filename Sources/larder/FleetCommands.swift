import ArgumentParser
import Configuration
import FoundationEssentials

/// `larder fleet ...`: the running node's view of its fleet.
struct FleetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet", abstract: "The running node's fleet (docs/fleet.md).",
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
        guard status == 200, let stats = JSONValue.parse(body) else {
            complain("stats failed (\(status)): \(body.trimmingWhitespace())")
            throw Exit.failure
        }
        guard let fleet = stats["fleet"], case .object = fleet else {
            complain("this node is not in a fleet (no [fleet] table in its configuration)")
            throw Exit.failure
        }
        if json {
            print(fleet.text)
        } else {
            print(Self.describe(fleet))
        }
        if fleet["connected"]?.bool != true { throw Exit.failure }
    }

    /// The section as a few lines for a person.
    static func describe(_ f: JSONValue) -> String {
        func n(_ key: String) -> Int { f[key]?.int ?? 0 }
        let connected = f["connected"]?.bool == true
        let rtt = f["redis_rtt_ms"]?.double.map { fixedPoint($0, digits: 2) + " ms" } ?? "unknown"
        let clock = f["clock_offset_ms"]?.int.map { offset in
            offset == 0 ? "same as Redis's" : "\(abs(offset)) ms \(offset > 0 ? "behind" : "ahead of") Redis's"
        } ?? "not measured yet"
        return """
            fleet \(f["name"]?.string ?? "?"), node \(f["node"]?.string ?? "?"): \
            \(connected ? "connected" : "NOT connected") to Redis (round trip \(rtt)), \(n("nodes")) live nodes
            master: \(f["master"]?.string ?? "none reached now")\
            \(f["sentinel"]?.bool == true ? " (Sentinel), \(n("failovers")) failovers, \(f["seconds_without_master"]?.double.map { fixedPoint($0, digits: 1) } ?? "0") s without a master" : "")
            clock: \(clock)
            purges: sent \(n("purges_sent")), received \(n("purges_received")), replayed \(n("purges_replayed")), \
            queued \(n("purges_queued"))
            shared tier: \(n("shared_connections")) workers connected, lookups \(n("shared_lookups")), \
            found \(n("shared_hits")), stored \(n("shared_stores")) (refused \(n("shared_stores_refused"))), \
            errors \(n("shared_errors"))
            last error: \(f["last_error"]?.string ?? "none")
            """
    }
}
