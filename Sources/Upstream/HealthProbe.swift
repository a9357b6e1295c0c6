import CCurl

/// One active health check: a blocking GET with libcurl's easy interface,
/// made on the health checker's own thread (never a worker's loop). The
/// body is read and dropped.
public enum HealthProbe {
    /// The status `url` answers with, or nil when it cannot be reached in
    /// `timeoutMilliseconds`.
    public static func status(_ url: String, timeoutMilliseconds: Int, settings: UpstreamSettings) -> Int? {
        guard larder_curl_load() == 0, let easy = larder_curl_easy_init() else { return nil }
        defer { larder_curl_easy_cleanup(easy) }
        _ = larder_easy_setopt_str(easy, CURLOPT_URL, url)
        _ = larder_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, timeoutMilliseconds)
        _ = larder_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, min(timeoutMilliseconds, settings.connectTimeoutMilliseconds))
        _ = larder_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = larder_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, settings.verifyTLS ? 1 : 0)
        _ = larder_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, settings.verifyTLS ? 2 : 0)
        if let caFile = settings.caFile { _ = larder_easy_setopt_str(easy, CURLOPT_CAINFO, caFile) }
        _ = larder_easy_setopt_datacb(easy, CURLOPT_WRITEFUNCTION) { _, size, count, _ in size * count }
        guard larder_curl_easy_perform(easy) == CURLE_OK else { return nil }
        var code = 0
        guard larder_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK, code > 0 else { return nil }
        return code
    }
}
