import AdminClient
import ArgumentParser
import CCurl
import Configuration
import FoundationEssentials

/// `larder log --follow`: the requests as the running proxy answers them,
/// one JSON object per line (the admin API's `GET /log?follow=1`).
struct LogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Follow the requests as they happen (JSON lines) from the admin API.",
        discussion: """
            Each line: time, client, method, target, status, bytes, first_byte_ms, total_ms, result \
            (hit, miss, pass, other), cache (the Cache-Status), upstream_status and upstream_ms when \
            the upstream answered, worker. A reader too slow for the traffic loses lines, reported \
            as {"dropped": N}; the proxy never waits for it.
            """
    )

    @OptionGroup var adminOptions: AdminOptions

    @Flag(help: "Follow the requests as they happen (required: the log is a stream).")
    var follow = false

    @Option(help: "Only this status (404) or class (5xx).")
    var status: String?

    @Option(help: "Only this result: hit, miss, pass or other.")
    var result: String?

    @Option(help: "Only targets under this path prefix, e.g. /v1/.")
    var prefix: String?

    @Option(name: .customLong("slower-than"), help: "Only answers that took longer, e.g. 100ms or 2s.")
    var slowerThan: String?

    func validate() throws {
        guard follow else { throw ValidationError("larder log needs --follow: it shows the requests as they happen") }
    }

    func run() throws {
        var query = "/log?follow=1"
        for (name, value) in [("status", status), ("result", result), ("prefix", prefix), ("slower-than", slowerThan)] {
            guard let value else { continue }
            query += "&\(name)=" + percentEncoded(value, keeping: "")
        }
        switch AdminHTTP.stream(url: try adminOptions.baseURL() + query, token: try adminOptions.token()) {
        case .failure(let message):
            complain("cannot reach the admin API at \((try? adminOptions.baseURL()) ?? "the admin API"): \(message); is larder running, and is --admin right?")
            throw Exit.unavailable
        case .success(let status, let body):
            if status == 401 || status == 403 {
                complain("the admin API at \((try? adminOptions.baseURL()) ?? "the admin API") refused the token (\(status)); pass --admin-token-file or set LARDER_ADMIN_TOKEN")
                throw Exit.noPermission
            }
            guard status == 200 else {
                let message = JSONValue.parse(body)?["error"]?.string
                complain("log: \(message ?? body.trimmingWhitespace())")
                throw status == 400 ? Exit.usage : Exit.failure
            }
        }
    }
}

extension AdminHTTP {
    private final class Stream {
        let easy: UnsafeMutableRawPointer
        var status = 0
        var errorBody: [UInt8] = []
        init(_ easy: UnsafeMutableRawPointer) { self.easy = easy }
    }

    /// A streamed GET: a 200's body goes to stdout as it arrives (flushed
    /// per piece); another status's body is returned. Ends when the server
    /// closes the stream.
    static func stream(url: String, token: String?) -> Result {
        withEasy(url: url, token: token, stream(on:))
    }

    private static func stream(on easy: UnsafeMutableRawPointer) -> Result {
        let state = Stream(easy)
        let box = Unmanaged.passRetained(state)
        defer { box.release() }
        _ = larder_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, box.toOpaque())
        _ = larder_easy_setopt_datacb(easy, CURLOPT_WRITEFUNCTION) { ptr, size, count, user in
            let n = size * count
            guard let ptr, let user else { return n }
            let state = Unmanaged<Stream>.fromOpaque(user).takeUnretainedValue()
            if state.status == 0 { _ = larder_easy_getinfo_long(state.easy, CURLINFO_RESPONSE_CODE, &state.status) }
            if state.status == 200 {
                fwrite(ptr, 1, n, stdout)
                fflush(stdout)
            } else {
                state.errorBody.append(contentsOf: UnsafeRawBufferPointer(start: ptr, count: n))
            }
            return n
        }
        let code = larder_curl_easy_perform(easy)
        var status = state.status
        if status == 0 { _ = larder_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status) }
        guard code == CURLE_OK || status == 200 else { return .failure(String(cString: larder_curl_easy_strerror(code))) }
        return .success(status: status, body: String(decoding: state.errorBody, as: UTF8.self))
    }
}
