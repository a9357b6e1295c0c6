import XCTest
@testable import Admin

/// What a web page in a visitor's browser may not do to the admin API.
final class AdminRequestGuardTests: XCTestCase {
    private let guardian = AdminRequestGuard(allowedHosts: ["Cache-Admin.example"])

    private func refused(_ method: String = "GET", host: String? = "127.0.0.1:8081", origin: String? = nil,
                         site: String? = nil, type: String? = nil, token: Bool = false) -> Bool {
        guardian.refusal(method: method, host: host, origin: origin, fetchSite: site, contentType: type, tokenRequired: token) != nil
    }

    func testHostNamesOtherThanAddressesAndConfiguredOnesAreRefusedWithoutAToken() {
        for host in ["127.0.0.1", "127.0.0.1:8081", "[::1]:8081", "localhost:8081", "LOCALHOST", "10.0.0.5", "cache-admin.example:8081"] {
            XCTAssertFalse(refused(host: host), host)
        }
        XCTAssertFalse(refused(host: nil), "HTTP/1.0 without Host")
        for host in ["evil.example", "evil.example:8081", "127.0.0.1.evil.example", "1.2.3", "256.1.1.1"] {
            XCTAssertTrue(refused(host: host), host)
        }
        XCTAssertFalse(refused(host: "cache-1.internal:8081", token: true), "with a token any name goes")
    }

    func testStateChangingRequestsAPageCouldSendCrossSiteAreRefused() {
        XCTAssertTrue(refused("POST", origin: "https://evil.example"))
        XCTAssertTrue(refused("POST", origin: "null"))
        XCTAssertTrue(refused("POST", site: "cross-site"))
        XCTAssertTrue(refused("POST", site: "same-site"))
        XCTAssertTrue(refused("POST", type: "application/x-www-form-urlencoded"))
        XCTAssertTrue(refused("PURGE", type: "Text/Plain; charset=utf-8"))
        XCTAssertTrue(refused("POST", origin: "https://evil.example", token: true), "a token does not make a cross-site POST fine")
        XCTAssertFalse(refused("POST"), "a tool: no Origin, no form")
        XCTAssertFalse(refused("POST", origin: "http://127.0.0.1:8081", site: "same-origin"), "the admin API's own page")
        XCTAssertFalse(refused("POST", type: "application/json"))
        XCTAssertFalse(refused("GET", origin: "https://evil.example"), "a read: the answer is not the page's to see")
    }
}
