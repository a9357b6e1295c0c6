import CCurl
import Upstream

/// One blocking request with libcurl's easy interface (the command line
/// needs nothing more).
public enum AdminHTTP {
    public enum Result {
        case success(status: Int, body: String)
        case failure(String)
    }

    private final class Sink {
        var bytes: [UInt8] = []
    }

    /// An easy handle set up for `url` with the token, handed to `body`
    /// and cleaned up after it.
    public static func withEasy(url: String, token: String?, _ body: (UnsafeMutableRawPointer) -> Result) -> Result {
        if let why = UpstreamClient.libraryError() { return .failure(why) }
        guard let easy = larder_curl_easy_init() else { return .failure("libcurl failed to make a handle") }
        defer { larder_curl_easy_cleanup(easy) }
        var headers: UnsafeMutablePointer<curl_slist>?
        if let token { headers = larder_curl_slist_append(headers, "Authorization: Bearer \(token)") }
        defer { larder_curl_slist_free_all(headers) }
        _ = larder_easy_setopt_str(easy, CURLOPT_URL, url)
        _ = larder_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, 5000)
        _ = larder_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = larder_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headers)
        return body(easy)
    }

    public static func perform(method: String, url: String, token: String?) -> Result {
        withEasy(url: url, token: token) { easy in perform(method: method, on: easy) }
    }

    private static func perform(method: String, on easy: UnsafeMutableRawPointer) -> Result {
        let sink = Sink()
        let box = Unmanaged.passRetained(sink)
        defer { box.release() }
        _ = larder_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, method)
        // A purge waits for the disk index after a start; allow for it.
        _ = larder_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, 180_000)
        _ = larder_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, box.toOpaque())
        _ = larder_easy_setopt_datacb(easy, CURLOPT_WRITEFUNCTION) { ptr, size, count, user in
            let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
            let n = size * count
            if let ptr { sink.bytes.append(contentsOf: UnsafeRawBufferPointer(start: ptr, count: n)) }
            return n
        }
        let code = larder_curl_easy_perform(easy)
        guard code == CURLE_OK else { return .failure(String(cString: larder_curl_easy_strerror(code))) }
        var status = 0
        _ = larder_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return .success(status: status, body: String(decoding: sink.bytes, as: UTF8.self))
    }
}
