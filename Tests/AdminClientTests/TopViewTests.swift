import XCTest
@testable import AdminClient

/// `larder top`'s figures from readings of /metrics and /top, without a daemon.
final class TopViewTests: XCTestCase {
    /// The figures from two readings of /metrics, without a terminal.
    func testRatesRatiosAndQuantilesFromTwoReadings() {
        let before = TopSample(time: 10, metrics: """
            larder_hits_total 100
            larder_misses_total 50
            larder_request_duration_seconds_count{result="hit"} 100
            larder_request_duration_seconds_count{result="miss"} 50
            larder_upstream_response_seconds_bucket{le="0.001"} 10
            larder_upstream_response_seconds_bucket{le="0.01"} 40
            larder_upstream_response_seconds_bucket{le="+Inf"} 50
            larder_responses_total{code="5xx",result="miss"} 1
            larder_responses_total{code="5xx",result="other"} 0
            larder_responses_total{code="4xx",result="miss"} 5
            larder_upstream_server_up{upstream="api",server="http://a:1"} 1
            larder_upstream_server_up{upstream="api",server="http://b:1"} 1
            larder_upstream_server_requests_total{upstream="api",server="http://a:1"} 100
            larder_upstream_server_requests_total{upstream="api",server="http://b:1"} 100
            larder_upstream_server_errors_total{upstream="api",server="http://b:1"} 0
            larder_upstream_server_heads_total{upstream="api",server="http://a:1"} 100
            larder_upstream_server_head_seconds_total{upstream="api",server="http://a:1"} 0.2
            """)
        let after = TopSample(time: 12, metrics: """
            # HELP larder_hits_total Requests answered with a fresh stored response
            larder_hits_total 280
            larder_misses_total 70
            larder_request_duration_seconds_count{result="hit"} 280
            larder_request_duration_seconds_count{result="miss"} 70
            larder_upstream_response_seconds_bucket{le="0.001"} 10
            larder_upstream_response_seconds_bucket{le="0.01"} 60
            larder_upstream_response_seconds_bucket{le="+Inf"} 70
            larder_responses_total{code="5xx",result="miss"} 3
            larder_responses_total{code="5xx",result="other"} 4
            larder_responses_total{code="4xx",result="miss"} 25
            larder_upstream_server_up{upstream="api",server="http://a:1"} 1
            larder_upstream_server_up{upstream="api",server="http://b:1"} 0
            larder_upstream_server_requests_total{upstream="api",server="http://a:1"} 120
            larder_upstream_server_requests_total{upstream="api",server="http://b:1"} 101
            larder_upstream_server_errors_total{upstream="api",server="http://b:1"} 1
            larder_upstream_server_heads_total{upstream="api",server="http://a:1"} 120
            larder_upstream_server_head_seconds_total{upstream="api",server="http://a:1"} 0.24
            """)
        let view = TopView(previous: before, current: after)
        XCTAssertEqual(view.errorsPerSecond, 3, "5xx answers, whatever their result")
        XCTAssertEqual(view.serverLines, ["", "server       api http://a:1  up  req/s 10.0  errors/s 0.0  avg 2.0ms",
                                          "server       api http://b:1  DOWN  req/s 0.5  errors/s 0.5  avg -"])
        XCTAssertEqual(view.rate("larder_hits_total"), 90)
        XCTAssertEqual(view.requestsPerSecond, 100)
        XCTAssertEqual(view.requestsSinceStart, 350)
        XCTAssertEqual(view.hitRatioNow ?? 0, 0.9, accuracy: 1e-9)
        // 20 new observations, all between 1 and 10 ms: the median halfway.
        XCTAssertEqual(view.quantile(0.5, of: "larder_upstream_response_seconds") ?? 0, 0.0055, accuracy: 1e-9)
        XCTAssertNil(TopView(previous: after, current: after).quantile(0.5, of: "larder_upstream_response_seconds"))
        XCTAssertNil(TopView(previous: nil, current: after).hitRatioNow, "no interval yet")
        XCTAssertEqual(view.protocolLines, [], "no HTTP/2 or HTTP/3 connection yet")
        let h3 = TopView(previous: TopSample(time: 0, metrics: "larder_http3_connections_total 2\nlarder_http3_requests_total 10"),
                         current: TopSample(time: 2, metrics: "larder_http3_connections_total 6\nlarder_http3_requests_total 50"))
        XCTAssertEqual(h3.protocolLines, ["http3        connections/s 2.0  streams/s 20.0  (6 connections, 50 streams since start)"])
        XCTAssertEqual(TopView.bytes(3 * 1_048_576), "3.0 MiB")
        XCTAssertEqual(TopView.duration(3725), "1h02m")
    }

    /// The admin API's /top as the screen shows it.
    func testTopURLsFromTheAdminAPI() throws {
        let urls = try XCTUnwrap(TopURLs(json: """
            {"window_seconds": 60, "by_requests": [{"target": "/v1/a", "requests": 320, "misses": 1, "errors": 0}],
             "by_misses": [{"target": "/v1/b", "requests": 4, "misses": 4, "errors": 1}],
             "prefixes": [{"prefix": "/v1/", "requests": 324, "misses": 5, "errors": 1}]}
            """))
        XCTAssertEqual(urls, TopURLs(byRequests: [.init(name: "/v1/a", requests: 320, misses: 1)],
                                     byMisses: [.init(name: "/v1/b", requests: 4, misses: 4)],
                                     prefixes: [.init(name: "/v1/", requests: 324, misses: 5)]))
        XCTAssertTrue(urls.lines.contains("        320       1  /v1/a"), "\(urls.lines)")
        XCTAssertTrue(urls.lines.contains("prefixes     /v1/ 324"), "\(urls.lines)")
        XCTAssertNil(TopURLs(json: "{\"error\": \"no such admin endpoint /top\"}"), "an older node: no top URLs")
    }
}
