import AdminClient
import ArgumentParser
import Configuration
import EventLoop
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `larder top`: the running proxy's figures, refreshed, from the admin
/// API's `/metrics` (so it works against a remote node with --admin and a
/// token). On a terminal: a full screen, `q` quits; otherwise one
/// `key=value` line per refresh.
struct Top: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "top",
        abstract: "Show requests/s, hit ratio, latencies and tier use live, from the admin API.",
        discussion: "On a terminal the screen refreshes in place and q quits; piped, one line per refresh."
    )

    @OptionGroup var adminOptions: AdminOptions

    @Option(help: "Seconds between refreshes (0.1 to 60).")
    var interval: Double = 1

    @Option(help: "Stop after this many refreshes (default: until q or Ctrl-C).")
    var count: Int?

    @Option(help: "Top URLs shown, by requests and by misses over the last minute (0 hides them; at most 50).")
    var urls = 5

    @Option(help: "Path segments in a prefix of the top prefixes (1 to 8: /v1/ is 1, /v1/users/ is 2).")
    var depth = 1

    func validate() throws {
        guard interval >= 0.1, interval <= 60 else { throw ValidationError("--interval must be between 0.1 and 60 seconds") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        guard (0...50).contains(urls) else { throw ValidationError("--urls must be between 0 and 50") }
        guard (1...8).contains(depth) else { throw ValidationError("--depth must be between 1 and 8") }
    }

    func run() throws {
        // The first reading exits with the usual message when the admin API cannot be reached.
        let first = try adminOptions.send(method: "GET", pathAndQuery: "/metrics")
        guard first.status == 200 else {
            complain("top: the admin API answered \(first.status) for /metrics")
            throw Exit.failure
        }
        let token = try adminOptions.token()
        let base = try adminOptions.baseURL()
        let screen = isatty(STDOUT_FILENO) == 1 ? TerminalScreen() : nil
        defer { screen?.restore() }
        var previous: TopSample?
        var current = TopSample(time: Self.monotonicSeconds(), metrics: first.body)
        var shown = 0
        var problem: String?
        while true {
            let view = TopView(previous: previous, current: current, urls: topURLs(base: base, token: token))
            if let screen {
                screen.draw(view.lines(admin: base) + (problem.map { ["", $0] } ?? []))
            } else {
                print(problem ?? view.plainLine())
                fflush(stdout)
            }
            shown += 1
            if let count, shown >= count { return }
            if Self.waitForQuit(seconds: interval, watching: screen != nil) { return }
            switch AdminHTTP.perform(method: "GET", url: base + "/metrics", token: token) {
            case .success(200, let body):
                (previous, current, problem) = (current, TopSample(time: Self.monotonicSeconds(), metrics: body), nil)
            case .success(let status, _):
                problem = "the admin API answered \(status); still trying"
            case .failure(let message):
                problem = "cannot reach the admin API: \(message); still trying"
            }
        }
    }

    /// The last minute's top URLs; nil when hidden or not offered (an
    /// older node), or unreadable this time (the figures still show).
    private func topURLs(base: String, token: String?) -> TopURLs? {
        guard urls > 0, case .success(200, let body) = AdminHTTP.perform(method: "GET", url: base + "/top?limit=\(urls)&depth=\(depth)",
                                                                          token: token) else { return nil }
        return TopURLs(json: body)
    }

    /// Waits `seconds`; true when q was typed (terminal) or on Ctrl-C.
    private static func waitForQuit(seconds: Double, watching: Bool) -> Bool {
        let deadline = monotonicSeconds() + seconds
        while true {
            if TerminalScreen.interrupted.load(ordering: .relaxed) { return true }
            let left = deadline - monotonicSeconds()
            if left <= 0 { return false }
            guard watching else {
                usleep(UInt32(min(left, 0.1) * 1_000_000))
                continue
            }
            var fds = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
            if poll(&fds, 1, Int32(min(left, 0.1) * 1000)) > 0 {
                var byte: UInt8 = 0
                let n = read(STDIN_FILENO, &byte, 1)
                if n == 0 { return true }  // the terminal went away
                if n == 1 && (byte == UInt8(ascii: "q") || byte == UInt8(ascii: "Q")) { return true }
            }
        }
    }

    static func monotonicSeconds() -> Double { Double(EventLoop.nowMicroseconds()) / 1e6 }
}
