import Telemetry
import XCTest
import CacheSemantics
import CacheStorage
@testable import Admin

/// The status page's sign-in: `/?token=` becomes a cookie, which stands for
/// the token in reads only; and the endpoints the page reads.
final class StatusPageTests: XCTestCase {
    private var now: Int64 = 2_000_000
    private let samples = RequestSamples()

    private func api(token: String?) -> AdminAPI {
        AdminAPI(store: TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20)]), stats: ProxyStats(), token: token,
                 startedAt: 1_999_000, clock: { [unowned self] in now }, purgeScopes: { [.key($0)] }, samples: samples, log: { _ in })
    }

    func testATokenInTheAddressBecomesACookieForReadsOnly() throws {
        let token = "s3cret token;\"%"
        let admin = api(token: token)
        let anonymous = admin.handle(method: "GET", target: "/", authorization: nil)
        XCTAssertEqual(anonymous.status, 401)
        XCTAssertTrue(anonymous.body.contains("/?token="), "says how to sign in")
        XCTAssertEqual(anonymous.contentType, "text/html; charset=utf-8")
        XCTAssertEqual(admin.handle(method: "GET", target: "/?token=wrong", authorization: nil).status, 401)

        let signIn = admin.handle(method: "GET", target: "/?token=s3cret%20token%3B%22%25", authorization: nil)
        XCTAssertEqual(signIn.status, 303)
        XCTAssertEqual(signIn.extraHeaders["location"], "/", "the token leaves the address at once")
        let setCookie = try XCTUnwrap(signIn.extraHeaders["set-cookie"])
        XCTAssertTrue(setCookie.hasSuffix("; Path=/; HttpOnly; SameSite=Strict"), setCookie)
        let pair = String(setCookie.prefix { $0 != ";" })
        XCTAssertTrue(pair.hasPrefix("larder_admin="), pair)
        let session = String(pair.dropFirst("larder_admin=".count))
        XCTAssertEqual(session.count, 64)
        XCTAssertFalse(setCookie.contains("s3cret"), "the cookie holds a session value, never the token")
        XCTAssertEqual(api(token: token).handle(method: "GET", target: "/stats", authorization: nil, cookie: pair).status, 401,
                       "another process (a restart) draws another session value")
        let cookie = "theme=dark; " + pair

        let page = admin.handle(method: "GET", target: "/", authorization: nil, cookie: cookie)
        XCTAssertEqual(page.status, 200)
        XCTAssertTrue(page.body.contains("<script src=\"/status.js\">"))
        XCTAssertEqual(page.extraHeaders["content-security-policy"], StatusPage.securityPolicy)
        XCTAssertFalse(StatusPage.securityPolicy.contains("script-src 'self' 'unsafe-inline'"))
        for target in ["/stats", "/metrics", "/top", "/history", "/errors", "/status.js", "/healthz"] {
            XCTAssertEqual(admin.handle(method: "GET", target: target, authorization: nil, cookie: cookie).status, 200, target)
        }
        XCTAssertEqual(admin.handle(method: "GET", target: "/", authorization: "Bearer " + token).status, 200)
        // A page elsewhere could make the browser send the cookie: nothing that changes the cache takes it.
        for (method, target) in [("POST", "/purge?all=true"), ("PURGE", "/x"), ("POST", "/memory/clear"), ("POST", "/prune?older-than=1s")] {
            XCTAssertEqual(admin.handle(method: method, target: target, authorization: nil, cookie: cookie).status, 401, target)
        }
        for bad in ["larder_admin=wrong", "larder_admin=", "other=" + pair, "larder_admin", "larder_admin=s3cret%20token%3B%22%25"] {
            XCTAssertEqual(admin.handle(method: "GET", target: "/stats", authorization: nil, cookie: bad).status, 401, bad)
        }
    }

    func testWithoutATokenThePageIsOpen() {
        let admin = api(token: nil)
        XCTAssertEqual(admin.handle(method: "GET", target: "/", authorization: nil).status, 200)
        XCTAssertEqual(admin.handle(method: "POST", target: "/", authorization: nil).status, 405)
        let script = admin.handle(method: "GET", target: "/status.js", authorization: nil)
        XCTAssertEqual(script.contentType, "text/javascript; charset=utf-8")
        XCTAssertFalse(script.body.contains("innerHTML"), "what clients sent is shown as text only")
    }

    func testTopHistoryAndErrorsFromWhatWorkersSampled() throws {
        let admin = api(token: nil)
        admin.tick()
        let queue = samples.makeQueue()
        for _ in 0..<3 { queue.push(RequestSample(time: now, method: "GET", target: "/v1/hot", status: 200, result: .hit, weight: 16)) }
        queue.push(RequestSample(time: now, method: "GET", target: "/v1/cold", status: 200, result: .miss, weight: 1))
        queue.push(RequestSample(time: now - 1, method: "GET", target: "/v2/bad\"", status: 502, result: .other, weight: 1,
                                 cache: "fwd=miss; detail=upstream-unreachable"))
        let top = try json(admin.handle(method: "GET", target: "/top?limit=2&depth=1", authorization: nil))
        let byRequests = try XCTUnwrap(top["by_requests"] as? [[String: Any]])
        XCTAssertEqual(byRequests.map { $0["target"] as? String }, ["/v1/hot", "/v1/cold"])
        XCTAssertEqual(byRequests.first?["requests"] as? Int, 48)
        XCTAssertEqual((top["by_misses"] as? [[String: Any]])?.map { $0["target"] as? String }, ["/v1/cold"])
        XCTAssertEqual((top["prefixes"] as? [[String: Any]])?.first?["prefix"] as? String, "/v1/")
        XCTAssertEqual((top["prefixes"] as? [[String: Any]])?.first?["requests"] as? Int, 49)
        let errors = try XCTUnwrap(try json(admin.handle(method: "GET", target: "/errors", authorization: nil))["errors"] as? [[String: Any]])
        XCTAssertEqual(errors.count, 1)
        XCTAssertEqual(errors.first?["target"] as? String, "/v2/bad\"")
        XCTAssertEqual(errors.first?["status"] as? Int, 502)
        XCTAssertEqual(errors.first?["cache"] as? String, "fwd=miss; detail=upstream-unreachable")

        now += 1
        admin.tick()
        let history = try json(admin.handle(method: "GET", target: "/history", authorization: nil))
        let points = try XCTUnwrap(history["points"] as? [[String: Any]])
        XCTAssertEqual(points.count, 1)
        XCTAssertEqual(points.first?["errors"] as? Int, 1)
        XCTAssertEqual(points.first?["time"] as? Int, Int(now))
        let later = try json(admin.handle(method: "GET", target: "/history?since=\(now)", authorization: nil))
        XCTAssertEqual((later["points"] as? [Any])?.count, 0, "since= gives only newer points")

        for bad in ["/top?limit=0", "/top?limit=x", "/top?depth=9", "/history?since=-1", "/history?since=soon"] {
            let response = admin.handle(method: "GET", target: bad, authorization: nil)
            XCTAssertEqual(response.status, 400, bad)
            XCTAssertNotNil(try json(response)["error"] as? String, bad)
        }
    }

    private func json(_ response: AdminAPI.Response) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any])
    }
}
