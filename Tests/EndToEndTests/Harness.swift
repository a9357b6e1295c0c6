import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Locations of the package and the built `larder` binary.
enum Paths {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static let originScript = packageRoot.appendingPathComponent("Tests/EndToEndTests/origin.py").path
    static let h2client = packageRoot.appendingPathComponent("Tests/EndToEndTests/h2client.py").path
    static let h2attacks = packageRoot.appendingPathComponent("Tests/EndToEndTests/h2attacks.py").path
    static let h3client = packageRoot.appendingPathComponent("Tests/EndToEndTests/h3client.py").path
    static let h3attacks = packageRoot.appendingPathComponent("Tests/EndToEndTests/h3attacks.py").path
    /// The Python with aioquic (PyPI) that `.ci/install-deps --test` puts in .venv.
    static let aioquicPython = packageRoot.appendingPathComponent(".venv/bin/python").path

    /// `swift test` builds the executable next to the test bundle.
    static var larder: String {
        var candidates: [String] = []
        let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dir = testBinary.deletingLastPathComponent()
        for _ in 0..<3 {
            candidates.append(dir.appendingPathComponent("larder").path)
            dir = dir.deletingLastPathComponent()
        }
        candidates.append(packageRoot.appendingPathComponent(".build/debug/larder").path)
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates.last!
    }
}

/// The python origin server of origin.py.
final class Origin {
    let child: ChildProcess
    let port: Int

    let scheme: String

    /// `tls`: certificate and key files; the origin then speaks https.
    init(tls: (cert: String, key: String)? = nil) throws {
        // Debian's Python (its python3-zstandard and python3-brotli), else the one on PATH.
        let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"
        var arguments = [python, Paths.originScript, "0"]
        if let tls { arguments += ["--tls", tls.cert, tls.key] }
        scheme = tls == nil ? "http" : "https"
        child = try ChildProcess("/usr/bin/env", arguments)
        guard let p = child.waitFor("PORT (\\d+)").flatMap(Int.init) else {
            child.stop()
            throw HarnessError("origin did not start: \(child.stderr)")
        }
        port = p
    }

    var url: String { "\(scheme)://127.0.0.1:\(port)" }

    /// How many requests the origin received for this path-and-query.
    func count(_ pathAndQuery: String) throws -> Int {
        let key = pathAndQuery.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? pathAndQuery
        let r = try HTTPClient(port: port).get("/__count?key=\(key)")
        return Int(r.text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// Waits (bounded) until `n` requests for `pathAndQuery` came; returns how many did.
    func waitForCount(_ pathAndQuery: String, atLeast n: Int) throws -> Int { try waitFor(n) { try count(pathAndQuery) } }

    /// Asks `figure` (bounded, 10 s) until it is at least `n`; its last answer.
    private func waitFor(_ n: Int, _ figure: () throws -> Int) throws -> Int {
        let deadline = Date().addingTimeInterval(10)
        var seen = try figure()
        while seen < n && Date() < deadline {
            usleep(20_000)
            seen = try figure()
        }
        return seen
    }

    /// How many requests for this path-and-query the origin holds now (`hold_after`).
    func held(_ pathAndQuery: String) throws -> Int {
        let key = pathAndQuery.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? pathAndQuery
        return Int(try HTTPClient(port: port).get("/__held?key=\(key)").text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// Lets the requests held for this path-and-query (and later ones) answer.
    func release(_ pathAndQuery: String) throws {
        let key = pathAndQuery.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? pathAndQuery
        _ = try HTTPClient(port: port).get("/__release?key=\(key)")
    }

    /// Waits (bounded) until `n` requests for `pathAndQuery` are held; returns how many are.
    func waitForHeld(_ pathAndQuery: String, _ n: Int) throws -> Int { try waitFor(n) { try held(pathAndQuery) } }

    /// The last request the origin saw for this path-and-query.
    func lastRequest(_ pathAndQuery: String) throws -> [String: Any] {
        let key = pathAndQuery.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? pathAndQuery
        let r = try HTTPClient(port: port).get("/__last?key=\(key)")
        return (try JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any] ?? [:]
    }

    func stop() { child.stop() }
}

/// A running `larder serve`. Its admin API listens on an ephemeral port
/// (tests run side by side) unless `extra` says otherwise.
final class LarderProcess {
    let child: ChildProcess
    let port: Int
    /// nil when the admin API is off.
    let adminPort: Int?

    init(upstream: String, extra: [String] = [], environment: [String: String] = [:]) throws {
        let admin = extra.contains("--admin-listen") ? [] : ["--admin-listen", "127.0.0.1:0"]
        child = try ChildProcess(Paths.larder, ["serve", "--listen", "127.0.0.1:0", "--upstream", upstream,
                                                "--workers", "2", "--log-level", "warning"] + admin + extra,
                                 environment: environment)
        guard let line = child.waitFor("(listening on 127\\.0\\.0\\.1:\\d+.*)"),
              let p = line.firstMatch(of: #/listening on 127\.0\.0\.1:(\d+)/#).flatMap({ Int($0.1) }) else {
            child.stop()
            throw HarnessError("larder did not start: \(child.stderr)")
        }
        port = p
        adminPort = line.firstMatch(of: #/admin API on [^ ]+:(\d+)/#).flatMap { Int($0.1) }
    }

    func client() throws -> HTTPClient { try HTTPClient(port: port) }
    func adminClient() throws -> HTTPClient {
        guard let adminPort else { throw HarnessError("the admin API is off") }
        return try HTTPClient(port: adminPort)
    }
    var adminURL: String { "http://127.0.0.1:\(adminPort ?? 0)" }
    func stop() { child.stop() }

    /// The environment that lets a test move this Larder's clocks (`advanceClock`).
    static let testClock = ["LARDER_TEST_CLOCK": "1"]

    /// Moves every clock of this Larder on by `seconds` (started with
    /// `testClock`): lifetimes and timeouts pass without waiting for them.
    func advanceClock(_ seconds: Double) throws {
        let r = try adminClient().request("POST", "/debug/clock?advance=\(seconds)")
        guard r.status == 200 else { throw HarnessError("the clock did not move: \(r.status) \(String(decoding: r.body, as: UTF8.self))") }
    }
}

/// Memory figures mean nothing under AddressSanitizer (shadow memory,
/// quarantine): fuzz/sanitizers.sh sets this, and tests that measure RSS skip.
func skipMemoryFiguresUnderSanitizers() throws {
    if ProcessInfo.processInfo.environment["LARDER_TEST_SANITIZER"] != nil {
        throw XCTSkip("memory figures are not meaningful under a sanitizer")
    }
}

/// Resident and peak memory of a process, in bytes (from /proc).
func memory(of pid: Int32) -> (rss: Int, peak: Int) {
    let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    func kB(_ field: String) -> Int {
        let line = text.split(separator: "\n").first { $0.hasPrefix(field + ":") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first { !$0.isEmpty }.map(String.init)?
            .trimmingCharacters(in: .whitespaces) ?? "0") ?? 0) * 1024
    }
    return (kB("VmRSS"), kB("VmHWM"))
}


struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// A parsed HTTP response.
struct HTTPResponse {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
    func header(_ name: String) -> String? { headers.first { $0.0 == name.lowercased() }?.1 }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A minimal blocking HTTP/1.1 client over a raw socket, so tests control
/// every byte sent (pipelining, malformed requests). Reads time out after 20 s.
final class HTTPClient {
    let fd: Int32
    private var buffer: [UInt8] = []

    /// `receiveBuffer`: a small kernel buffer (set before connecting, so
    /// the window stays small), for a client that reads slowly.
    /// `source`: the loopback address it connects from (127.0.0.2, ...), for access lists and rate limits.
    init(port: Int, receiveBuffer: Int32? = nil, source: String? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if bound != 0 { close(fd); throw HarnessError("bind to \(source) failed: errno \(errno)") }
        }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var tv = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc != 0 { close(fd); throw HarnessError("connect to \(port) failed: errno \(errno)") }
    }

    deinit { close(fd) }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) throws {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { throw HarnessError("send failed: errno \(errno)") }
            off += n
        }
    }

    /// Every byte that arrives until the peer closes the connection (the
    /// receive timeout bounds each wait): for answers that are cut.
    func readUntilClosed() -> [UInt8] {
        var received = buffer
        buffer = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return received }
            received += chunk[0..<n]
        }
    }

    func get(_ target: String, headers: [String] = []) throws -> HTTPResponse {
        try send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n")
        return try readResponse()
    }

    /// Any method, with an empty body.
    func request(_ method: String, _ target: String, headers: [String] = []) throws -> HTTPResponse {
        try send("\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n")
        return try readResponse(method: method)
    }

    /// What arrives until it holds `text` (nil when it did not within 20 s
    /// or the stream ended): for streams, such as a followed log.
    func read(until text: String) throws -> String? {
        let deadline = Date().addingTimeInterval(20)
        let needle = Array(text.utf8)
        var searched = 0  // what was searched already (less the needle's length)
        while Date() < deadline {
            if buffer.count >= needle.count {
                let last = buffer.count - needle.count
                for start in max(0, searched - needle.count)...last where buffer[start] == needle[0]
                    && buffer[start..<(start + needle.count)].elementsEqual(needle) {
                    return String(decoding: buffer, as: UTF8.self)
                }
                searched = buffer.count
            }
            guard try fill() else { return nil }
        }
        return nil
    }

    /// Reads more bytes; false at end of stream.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 { throw HarnessError("recv failed (timeout?): errno \(errno)") }
        if n == 0 { return false }
        buffer.append(contentsOf: chunk[0..<n])
        return true
    }

    func readLine() throws -> String? {
        while true {
            if let i = buffer.firstIndex(of: 0x0A) {
                let line = buffer[0..<i]
                buffer.removeFirst(i + 1)
                // One scalar per byte: a test sees the exact bytes of a field.
                var text = String.UnicodeScalarView()
                for b in line.last == 0x0D ? line.dropLast() : line { text.append(Unicode.Scalar(b)) }
                return String(text)
            }
            if try !fill() { return nil }
        }
    }

    func readExactly(_ n: Int) throws -> [UInt8] {
        while buffer.count < n { if try !fill() { throw HarnessError("connection closed mid-body") } }
        let out = Array(buffer[0..<n])
        buffer.removeFirst(n)
        return out
    }

    /// Whether the server closed the connection (reads to EOF, bounded by the timeout).
    func isClosedByPeer() -> Bool {
        while true {
            guard let more = try? fill() else { return false }
            if !more { return true }
            buffer.removeAll()
        }
    }

    /// Reads one response (skipping 1xx) for a request with method `method`.
    func readResponse(method: String = "GET") throws -> HTTPResponse {
        while true {
            guard let statusLine = try readLine() else { throw HarnessError("connection closed before a response") }
            let parts = statusLine.split(separator: " ")
            guard parts.count >= 2, let status = Int(parts[1]) else { throw HarnessError("bad status line: \(statusLine)") }
            var headers: [(String, String)] = []
            while let line = try readLine(), !line.isEmpty {
                guard let colon = line.firstIndex(of: ":") else { throw HarnessError("bad header line: \(line)") }
                headers.append((line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
            if status < 200 { continue }
            var response = HTTPResponse(status: status, headers: headers, body: [])
            if method == "HEAD" || status == 204 || status == 304 { return response }
            if response.header("transfer-encoding")?.lowercased() == "chunked" {
                while true {
                    guard let sizeLine = try readLine(), let size = Int(sizeLine.split(separator: ";")[0], radix: 16) else {
                        throw HarnessError("bad chunk size")
                    }
                    if size == 0 {
                        while let trailer = try readLine(), !trailer.isEmpty {}
                        break
                    }
                    response.body += try readExactly(size)
                    _ = try readLine()
                }
            } else if let length = response.header("content-length").flatMap(Int.init) {
                response.body = try readExactly(length)
            } else {
                while try fill() {}
                response.body = buffer
                buffer.removeAll()
            }
            return response
        }
    }
}

/// The end-to-end fixture: a test case that starts its own origins and
/// larders with settings of its own; everything it started is stopped (by
/// PID) and every directory it made is removed at teardown.
///
/// Everything a test starts or creates is undone by teardown blocks, which
/// run last-in first-out: a process is stopped before the paths it was
/// given (made before it started) are removed.
class ConfiguredTestCase: XCTestCase {

    func startOrigin() throws -> Origin {
        let o = try Origin()
        addTeardownBlock(o.stop)
        return o
    }

    func startLarder(upstream: String, _ extra: [String] = [], environment: [String: String] = [:]) throws -> LarderProcess {
        let l = try LarderProcess(upstream: upstream, extra: extra, environment: environment)
        addTeardownBlock(l.stop)
        return l
    }

    /// Any other program a test needs (nginx, openssl, a socket
    /// activator), stopped at teardown.
    func startChild(_ path: String, _ arguments: [String], environment: [String: String] = [:],
                    withInput: Bool = false) throws -> ChildProcess {
        let child = try ChildProcess(path, arguments, environment: environment, withInput: withInput)
        addTeardownBlock(child.stop)
        return child
    }

    /// Runs a program (found on PATH) to its end, bounded: its status
    /// (nil: it did not end in time), stdout and stderr.
    func runProgram(_ arguments: [String], timeout: TimeInterval = 60) throws -> (status: Int32?, stdout: String, stderr: String) {
        let child = try startChild("/usr/bin/env", arguments)
        let status = child.waitForExit(timeout: timeout)
        child.drainOutput()
        return (status, child.stdout, child.stderr)
    }

    /// A fresh directory path under the temporary directory (not created),
    /// removed at teardown, after the processes using it stopped.
    func temporaryPath(_ prefix: String) -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    /// The lines of a file another process writes (an access log), once
    /// there are at least `n` of them or 10 s passed.
    func lines(atLeast n: Int, in path: String) -> [String] {
        let deadline = Date().addingTimeInterval(10)
        while true {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            let lines = text.split(separator: "\n").map(String.init)
            if lines.count >= n || Date() > deadline { return lines }
            usleep(50_000)
        }
    }

    func writeConfig(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("larder-test-\(UUID().uuidString).toml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    /// An origin and a larder in front of it started with `config` (TOML).
    func start(config: String) throws -> (origin: Origin, larder: LarderProcess) {
        let origin = try startOrigin()
        return (origin, try startLarder(upstream: origin.url, ["--config", try writeConfig(config)]))
    }
}

/// A test case with a fresh origin and a larder in front of it for each test.
class ProxyTestCase: ConfiguredTestCase {
    var origin: Origin!
    var larder: LarderProcess!

    override func setUpWithError() throws {
        origin = try startOrigin()
        larder = try startLarder(upstream: origin.url)
    }

    /// The header fields of the last request the origin saw for `target`.
    func originHeaders(_ target: String) throws -> [String: String] {
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        return Dictionary(pairs.map { ($0[0], $0[1]) }, uniquingKeysWith: { a, _ in a })
    }

    /// Waits (bounded) until the origin has seen `n` requests for `target`.
    func waitForOriginCount(_ target: String, atLeast n: Int) throws -> Int {
        try origin.waitForCount(target, atLeast: n)
    }
}
