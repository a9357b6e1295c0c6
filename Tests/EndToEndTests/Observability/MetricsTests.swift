import Foundation
import XCTest
@testable import larder
@testable import Configuration

/// `/metrics` beyond the counters: latency histograms by how requests were
/// answered, the upstream's latency, bytes in and out, open connections;
/// the exposition checked by Prometheus' own `promtool`.
final class MetricsEndToEndTests: ProxyTestCase {
    /// Samples by their name with labels, as written.
    private func samples(_ text: String) -> [String: Double] {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            if parts.count == 2 { values[String(parts[0])] = Double(parts[1]) }
        }
        return values
    }

    func testLatencyHistogramsCountEachAnswerByHowItWasMade() throws {
        let c = try larder.client()
        XCTAssertEqual(try c.get("/m/a").status, 200)  // miss
        XCTAssertEqual(try c.get("/m/a").status, 200)  // hit
        XCTAssertEqual(try c.get("/m/a", headers: ["Range: bytes=0-3"]).status, 206)  // hit
        XCTAssertEqual(try c.request("POST", "/m/p").status, 200)  // pass
        XCTAssertEqual(try c.get("/m/a", headers: ["Larder-Cache-Policy: whenever"]).status, 400)  // other
        let text = try larder.adminClient().get("/metrics").text
        let v = samples(text)
        for (series, counts) in [("larder_request_duration_seconds", ["hit": 2.0, "miss": 1, "pass": 1, "other": 1]),
                                 ("larder_request_first_byte_seconds", ["hit": 2.0, "miss": 1, "pass": 1, "other": 1])] {
            for (result, n) in counts {
                XCTAssertEqual(v["\(series)_count{result=\"\(result)\"}"], n, "\(series) \(result)")
                XCTAssertEqual(v["\(series)_bucket{result=\"\(result)\",le=\"+Inf\"}"], n, "\(series) \(result)")
                XCTAssertEqual(v["\(series)_bucket{result=\"\(result)\",le=\"10\"}"], n, "\(series) \(result): under 10 s")
                XCTAssertNotNil(v["\(series)_sum{result=\"\(result)\"}"])
            }
        }
        // Cumulative buckets: never smaller towards larger bounds.
        var previous = 0.0
        for bound in ["0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1",
                      "2.5", "5", "10", "+Inf"] {
            let n = try XCTUnwrap(v["larder_request_duration_seconds_bucket{result=\"miss\",le=\"\(bound)\"}"], bound)
            XCTAssertGreaterThanOrEqual(n, previous, bound)
            previous = n
        }
        XCTAssertEqual(v["larder_upstream_response_seconds_count"], 2, "the miss and the POST")
        XCTAssertGreaterThan(v["larder_upstream_response_seconds_sum"] ?? 0, 0)
        XCTAssertGreaterThan(v["larder_client_received_bytes_total"] ?? 0, 100)
        XCTAssertGreaterThan(v["larder_client_sent_bytes_total"] ?? 0, 100)
        XCTAssertGreaterThanOrEqual(v["larder_open_connections"] ?? 0, 1)
        XCTAssertEqual(v["larder_memory_evictions_total"], 0)
        XCTAssertEqual(v["larder_disk_write_queue_bytes"], 0)

        // A slow origin shows in the upstream's latency and the miss's.
        XCTAssertEqual(try c.get("/m/slow?delay=0.3").status, 200)
        let after = samples(try larder.adminClient().get("/metrics").text)
        XCTAssertEqual(after["larder_upstream_response_seconds_bucket{le=\"0.25\"}"], 2, "the slow one is above 0.25 s")
        XCTAssertEqual(after["larder_upstream_response_seconds_count"], 3)
        XCTAssertEqual(after["larder_request_duration_seconds_bucket{result=\"miss\",le=\"0.25\"}"], 1)
        XCTAssertGreaterThanOrEqual(after["larder_request_duration_seconds_sum{result=\"miss\"}"] ?? 0, 0.3)
    }

    /// Answers by status class and result, the errors (5xx) among them in
    /// /stats, the build and the process.
    func testAnswersAreCountedByStatusClassWithErrorsAndTheProcess() throws {
        let c = try larder.client()
        XCTAssertEqual(try c.get("/m/ok").status, 200)  // miss
        XCTAssertEqual(try c.get("/m/ok").status, 200)  // hit
        XCTAssertEqual(try c.get("/m/gone?status=404&cc=none").status, 404)  // miss, not stored
        XCTAssertEqual(try c.get("/m/broken?status=503&cc=none").status, 503)  // a 5xx passed on
        XCTAssertEqual(try c.get("/m/a", headers: ["Larder-Cache-Policy: whenever"]).status, 400)  // other
        let v = samples(try larder.adminClient().get("/metrics").text)
        XCTAssertEqual(v["larder_responses_total{code=\"2xx\",result=\"miss\"}"], 1)
        XCTAssertEqual(v["larder_responses_total{code=\"2xx\",result=\"hit\"}"], 1)
        XCTAssertEqual(v["larder_responses_total{code=\"4xx\",result=\"miss\"}"], 1)
        XCTAssertEqual(v["larder_responses_total{code=\"4xx\",result=\"other\"}"], 1)
        let fiveHundreds = ["hit", "miss", "pass", "other"].compactMap { v["larder_responses_total{code=\"5xx\",result=\"\($0)\"}"] }
        XCTAssertEqual(fiveHundreds.reduce(0, +), 1, "the 503, whichever result it counts as")
        XCTAssertEqual(try statsFigure(larder, "errors"), 1, "errors in /stats: answers with a 5xx")
        XCTAssertEqual(v["larder_build_info{version=\"\(Larder.version)\"}"], 1)
        XCTAssertGreaterThan(v["process_resident_memory_bytes"] ?? 0, 1_048_576)
        XCTAssertGreaterThan(v["process_open_fds"] ?? 0, 3)
        XCTAssertGreaterThanOrEqual(v["process_max_fds"] ?? 0, v["process_open_fds"] ?? 0)
        XCTAssertGreaterThan(v["process_cpu_seconds_total"] ?? 0, 0)
        let start = try XCTUnwrap(v["process_start_time_seconds"])
        XCTAssertLessThanOrEqual(abs(start - Date().timeIntervalSince1970), 600, "the start, in seconds since the epoch")
    }

    /// Every worker's event-loop turns, as a histogram: a turn that ran
    /// long made every other connection of its worker wait.
    func testLoopTurnsAreCounted() throws {
        let before = samples(try larder.adminClient().get("/metrics").text)["larder_loop_turn_seconds_count"] ?? 0
        let c = try larder.client()
        for i in 0..<20 { XCTAssertEqual(try c.get("/m/turn/\(i % 3)").status, 200) }
        let v = samples(try larder.adminClient().get("/metrics").text)
        let count = try XCTUnwrap(v["larder_loop_turn_seconds_count"])
        XCTAssertGreaterThanOrEqual(count - before, 20, "at least a turn per request")
        XCTAssertEqual(v["larder_loop_turn_seconds_bucket{le=\"+Inf\"}"], count)
        XCTAssertNotNil(v["larder_loop_turn_seconds_sum"])
    }

    /// `promtool check metrics` (Debian's prometheus package, installed by
    /// `.ci/install-deps --test`) reads the exposition as Prometheus would.
    func testPromtoolAcceptsTheExposition() throws {
        let promtool = "/usr/bin/promtool"
        guard FileManager.default.isExecutableFile(atPath: promtool) else {
            // CI installs it: missing there is a failure, not a skip.
            if ProcessInfo.processInfo.environment["CI"] == "true" { return XCTFail("promtool is missing: .ci/install-deps --test") }
            throw XCTSkip("promtool is not installed (.ci/install-deps --test installs it)")
        }
        let c = try larder.client()
        _ = try c.get("/m/b")
        _ = try c.get("/m/b")
        let text = try larder.adminClient().get("/metrics").text
        let process = Process()
        process.executableURL = URL(fileURLWithPath: promtool)
        process.arguments = ["check", "metrics"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let report = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, report)
    }

    /// config/grafana-dashboard.json charts only series Larder exposes (a
    /// renamed metric would leave a panel empty without a word).
    func testTheGrafanaDashboardChartsOnlyExposedMetrics() throws {
        let path = Paths.packageRoot.appendingPathComponent("config/grafana-dashboard.json")
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(contentsOf: path)) as? [String: Any])
        let panels = try XCTUnwrap(json["panels"] as? [[String: Any]])
        XCTAssertGreaterThanOrEqual(panels.count, 8)
        let c = try larder.client()
        _ = try c.get("/m/d")
        let exposed = Set(samples(try larder.adminClient().get("/metrics").text).keys.map { String($0.prefix { $0 != "{" }) })
        var used = Set<String>()
        for panel in panels {
            for target in panel["targets"] as? [[String: Any]] ?? [] {
                let expr = try XCTUnwrap(target["expr"] as? String)
                for match in expr.matches(of: #/larder_[a-z_]+/#) { used.insert(String(match.output)) }
            }
        }
        XCTAssertGreaterThanOrEqual(used.count, 15)
        XCTAssertEqual(try Self.unknown(used, exposed: exposed), [], "charted but not exposed")
    }

    /// Metric names neither exposed by this (single) node nor among the
    /// fleet metrics a node in a fleet exposes (their names in Stats.swift).
    private static func unknown(_ names: Set<String>, exposed: Set<String>) throws -> Set<String> {
        let source = try String(contentsOf: Paths.packageRoot.appendingPathComponent("Sources/Admin/Stats.swift"), encoding: .utf8)
        return names.subtracting(exposed).filter { name in
            guard name.hasPrefix("larder_fleet_") else { return true }
            let metric = name.dropFirst("larder_fleet_".count).replacingOccurrences(of: "_total", with: "")
            return !source.contains("(\"\(metric)\"") && !source.contains("describe(\"\(metric)\"")
        }
    }

    /// config/prometheus-alerts.yml and config/prometheus.yml as promtool
    /// reads them, alerting only on series Larder exposes.
    func testThePrometheusRulesAndScrapeConfigAreValid() throws {
        let promtool = "/usr/bin/promtool"
        guard FileManager.default.isExecutableFile(atPath: promtool) else {
            if ProcessInfo.processInfo.environment["CI"] == "true" { return XCTFail("promtool is missing: .ci/install-deps --test") }
            throw XCTSkip("promtool is not installed (.ci/install-deps --test installs it)")
        }
        let config = Paths.packageRoot.appendingPathComponent("config")
        let rules = try runProgram(["promtool", "check", "rules", config.appendingPathComponent("prometheus-alerts.yml").path])
        XCTAssertEqual(rules.status, 0, rules.stdout + rules.stderr)
        // The scrape config as installed: its token file and rules beside it.
        let dir = temporaryPath("larder-prometheus")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try "read-token-for-prometheus\n".write(toFile: dir + "/larder-read-token", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: config.appendingPathComponent("prometheus-alerts.yml").path, toPath: dir + "/prometheus-alerts.yml")
        let scrape = try String(contentsOf: config.appendingPathComponent("prometheus.yml"), encoding: .utf8)
            .replacingOccurrences(of: "/etc/prometheus/larder-read-token", with: dir + "/larder-read-token")
        try scrape.write(toFile: dir + "/prometheus.yml", atomically: true, encoding: .utf8)
        let checked = try runProgram(["promtool", "check", "config", dir + "/prometheus.yml"])
        XCTAssertEqual(checked.status, 0, checked.stdout + checked.stderr)
        // Every series an alert names is one Larder exposes.
        _ = try larder.client().get("/m/e")
        let exposed = Set(samples(try larder.adminClient().get("/metrics").text).keys.map { String($0.prefix { $0 != "{" }) })
        let text = try String(contentsOf: config.appendingPathComponent("prometheus-alerts.yml"), encoding: .utf8)
        var used = Set<String>()
        for match in text.matches(of: #/(larder|process)_[a-z_]+/#) { used.insert(String(match.output.0)) }
        XCTAssertGreaterThanOrEqual(used.count, 6)
        XCTAssertEqual(try Self.unknown(used, exposed: exposed), [], "alerted on but not exposed")
    }
}
