#if canImport(Glibc)
import Glibc
#endif
import Telemetry
import Upstream

/// `larder_responses_total{code, result}` in Prometheus' text format,
/// from the workers' `ResponseCounts` summed at a scrape.
enum ResponseText {
    static func render(_ responses: [[Int]]) -> String {
        guard responses.count == ResponseCounts.classes.count else { return "" }
        var out = "# HELP larder_responses_total Answers sent to clients, by status class and how they were answered\n"
        out += "# TYPE larder_responses_total counter\n"
        for (c, code) in ResponseCounts.classes.enumerated() {
            for result in LatencyHistograms.Result.allCases {
                out += "larder_responses_total{code=\"\(code)\",result=\"\(result.label)\"} \(responses[c][result.rawValue])\n"
            }
        }
        return out
    }
}

/// `larder_build_info` and the process metrics Prometheus' client
/// libraries export under these names (CPU, memory, descriptors, start
/// time), read from /proc at a scrape.
enum ProcessText {
    static func render(version: String, startedAt: Int64) -> String {
        var out = "# HELP larder_build_info Larder's version (the value is always 1)\n# TYPE larder_build_info gauge\n"
        out += "larder_build_info{version=\"\(version)\"} 1\n"
        if let cpu = cpuSeconds() {
            out += "# HELP process_cpu_seconds_total User and system CPU time spent in seconds\n"
            out += "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total \(cpu)\n"
        }
        if let rss = residentBytes() {
            out += "# HELP process_resident_memory_bytes Resident memory size in bytes\n"
            out += "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes \(rss)\n"
        }
        if let open = openDescriptors() {
            out += "# HELP process_open_fds Number of open file descriptors\n# TYPE process_open_fds gauge\nprocess_open_fds \(open)\n"
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            out += "# HELP process_max_fds Maximum number of open file descriptors\n# TYPE process_max_fds gauge\n"
            out += "process_max_fds \(limit.rlim_cur)\n"
        }
        out += "# HELP process_start_time_seconds Start time of the process since the Unix epoch in seconds\n"
        out += "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds \(startedAt)\n"
        return out
    }

    /// utime + stime of /proc/self/stat (fields 14 and 15, after the command's closing parenthesis).
    static func cpuSeconds() -> String? {
        guard let text = read("/proc/self/stat"), let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After ")": state is field 3; utime and stime are fields 14 and 15.
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        let ticks = max(1, sysconf(Int32(_SC_CLK_TCK)))
        return LatencyText.seconds((user + system) * 1_000_000 / ticks)
    }

    static func residentBytes() -> Int? {
        guard let text = read("/proc/self/statm") else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    static func openDescriptors() -> Int? {
        guard let dir = opendir("/proc/self/fd") else { return nil }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { $0.first }
            if name != UInt8(ascii: ".") { count += 1 }
        }
        return max(0, count - 1)  // (the directory's own descriptor)
    }

    private static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
    }
}

/// Each upstream server's figures: `larder_upstream_server_*{upstream, server}`.
enum UpstreamText {
    static func render(_ pools: [UpstreamPoolFigures]) -> String {
        guard !pools.isEmpty else { return "" }
        var out = ""
        let series: [(String, String, String, (UpstreamServer.Figures) -> String)] = [
            ("requests_total", "counter", "Requests sent to the upstream server (retries included)", { String($0.requests) }),
            ("errors_total", "counter", "Requests to the server that could not connect or timed out", { String($0.errors) }),
            ("marked_down_total", "counter", "Times the server was left out after max_fails failures", { String($0.markedDown) }),
            ("up", "gauge", "1 while the server takes requests, 0 while it is left out", { $0.up ? "1" : "0" }),
            ("heads_total", "counter", "Response heads received from the server", { String($0.heads) }),
            ("head_seconds_total", "counter", "Time from the request to the response head, summed", { LatencyText.seconds($0.headMicroseconds) }),
        ]
        for (suffix, type, help, value) in series {
            let name = "larder_upstream_server_" + suffix
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for pool in pools {
                for server in pool.servers {
                    out += "\(name){upstream=\"\(escaped(pool.name))\",server=\"\(escaped(server.base))\"} \(value(server))\n"
                }
            }
        }
        return out
    }

    /// A label value as the text format escapes it.
    private static func escaped(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }
}
