import Foundation
import XCTest

/// Cache-Groups and Cache-Group-Invalidation (RFC 9875) against a real
/// origin: a successful unsafe request's response invalidates every stored
/// response of the groups it names; a group is also a purge tag.
final class CacheGroupsEndToEndTests: ProxyTestCase {
    /// The origin's `extra=` adds a field (percent-encoded there).
    private func field(_ name: String, _ value: String) -> String {
        "extra=\(name):" + value.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    private func isHit(_ target: String) throws -> Bool {
        try larder.client().get(target).header("cache-status")?.contains("hit") ?? false
    }

    func testAnUnsafeRequestsResponseInvalidatesItsGroups() throws {
        let scripts = "/cg/app.js?" + field("Cache-Groups", #""scripts", "bundle""#)
        let styles = "/cg/app.css?" + field("Cache-Groups", #""styles", "bundle""#)
        let alone = "/cg/other"
        for target in [scripts, styles, alone] {
            XCTAssertEqual(try larder.client().get(target).status, 200)
            XCTAssertTrue(try isHit(target), target)
        }
        // A failed write invalidates nothing; a GET's field is ignored.
        let failed = try larder.client().request("POST", "/cg/save?status=500&" + field("Cache-Group-Invalidation", #""scripts""#))
        XCTAssertEqual(failed.status, 500)
        _ = try larder.client().get("/cg/read?" + field("Cache-Group-Invalidation", #""scripts""#))
        XCTAssertTrue(try isHit(scripts))
        // A successful one: the group's responses, and only them.
        let saved = try larder.client().request("POST", "/cg/save?" + field("Cache-Group-Invalidation", #""scripts""#))
        XCTAssertEqual(saved.status, 200)
        XCTAssertFalse(try isHit(scripts), "invalidated")
        XCTAssertTrue(try isHit(styles))
        XCTAssertTrue(try isHit(alone))
        XCTAssertTrue(try isHit(scripts), "stored again")
        // Both share "bundle"; a value that does not parse names nothing.
        _ = try larder.client().request("DELETE", "/cg/x?" + field("Cache-Group-Invalidation", #""bundle" "styles""#))
        XCTAssertTrue(try isHit(styles))
        _ = try larder.client().request("DELETE", "/cg/x?" + field("Cache-Group-Invalidation", #""bundle""#))
        XCTAssertFalse(try isHit(scripts))
        XCTAssertFalse(try isHit(styles))
        XCTAssertTrue(try isHit(alone))
    }

    func testAGroupIsOneUpstreamsAndNotASurrogateKey() throws {
        let config = try writeConfig("""
            [upstreams.one]
            servers = ["\(origin.url)"]

            [upstreams.two]
            servers = ["\(origin.url)"]

            [[route]]
            prefix = "/one/"
            upstream = "one"

            [[route]]
            prefix = "/two/"
            upstream = "two"
            """)
        let scoped = try startLarder(upstream: origin.url, ["--config", config])
        func isHit(_ target: String) throws -> Bool { try scoped.client().get(target).header("cache-status")?.contains("hit") ?? false }
        let one = "/one/a?" + field("Cache-Groups", #""g""#), two = "/two/b?" + field("Cache-Groups", #""g""#)
        let keyed = "/other/c?" + field("Surrogate-Key", "g")
        for target in [one, two, keyed] {
            _ = try scoped.client().get(target)
            XCTAssertTrue(try isHit(target), target)
        }
        // The upstream "one" invalidates its group "g": not "two"'s, nor a Surrogate-Key of that name.
        XCTAssertEqual(try scoped.client().request("POST", "/one/save?" + field("Cache-Group-Invalidation", #""g""#)).status, 200)
        XCTAssertFalse(try isHit(one), "one's group")
        XCTAssertTrue(try isHit(two), "two's group of the same name")
        XCTAssertTrue(try isHit(keyed), "a tag of the same name")
        XCTAssertEqual(try scoped.client().request("PUT", "/two/save?" + field("Cache-Group-Invalidation", #""g""#)).status, 200)
        XCTAssertFalse(try isHit(two))
        XCTAssertTrue(try isHit(one), "stored again after its invalidation, and not two's")
        // The admin's tag purge reaches every response the name tags.
        XCTAssertEqual(try scoped.adminClient().request("POST", "/purge?tag=g").status, 200)
        XCTAssertFalse(try isHit(one))
        XCTAssertFalse(try isHit(keyed))
    }

    func testAGroupIsAPurgeTag() throws {
        let target = "/cg/tagged?" + field("Cache-Groups", #""news""#)
        _ = try larder.client().get(target)
        XCTAssertTrue(try isHit(target))
        let purged = try larder.adminClient().request("POST", "/purge?tag=news")
        XCTAssertEqual(purged.status, 200, purged.text)
        XCTAssertFalse(try isHit(target))
    }
}
