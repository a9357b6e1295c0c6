import HTTPHeaders
import XCTest
import CacheSemantics
import CacheStorage
import HTTP1
@testable import Proxy

/// The one path every upstream head takes, client fetch or background
/// refresh: the fields passed on, framing, timing, and 304 refreshes.
final class UpstreamResponseTests: XCTestCase {
    private let builder = StoredResponseBuilder(shared: true, targetedField: "cdn-cache-control")

    private func response(_ status: Int = 200, _ headers: HeaderFields, strip: Bool = false) -> UpstreamResponse {
        UpstreamResponse(status: status, reason: nil, headers: headers, requestTime: 1_000, responseTime: 1_002,
                         stripTagHeaders: strip)
    }

    private func stored(etag: String?, lastModified: String? = nil, cacheControl: String = "max-age=60") -> CachedResponse {
        var headers: HeaderFields = ["cache-control": cacheControl, "x-version": "old"]
        if let etag { headers.append("etag", etag) }
        if let lastModified { headers.append("last-modified", lastModified) }
        return builder.build(key: "/r", status: 200, reason: nil, headers: headers, body: UnsafeRawBufferPointer(start: nil, count: 0),
                             timing: ResponseTiming(requestTime: 1, responseTime: 1, dateValue: 1, ageValue: 0), tags: [],
                             varyFrom: { _ in nil })
    }

    func testHopByHopFieldsAndTheirNomineesAreNotPassedOn() {
        let r = response(200, ["connection": "x-private, close", "x-private": "1", "keep-alive": "timeout=5",
                               "transfer-encoding": "chunked", "content-type": "text/plain", "x-private": "2"])
        XCTAssertEqual(r.fields.map(\.name), ["content-type"])
        XCTAssertEqual(r.received.count, 6, "what came is kept for the tags")
    }

    func testTransferEncodingWinsOverContentLength() {
        let r = response(200, ["content-length": "5", "transfer-encoding": "chunked"])
        XCTAssertEqual(r.framing, .transferCoded)
        XCTAssertNil(r.length)
        XCTAssertFalse(r.fields.contains { $0.name == "content-length" })
        XCTAssertEqual(response(200, ["content-length": "5"]).length, 5)
        guard case .invalid = response(200, ["content-length": "5", "content-length": "6"]).framing else {
            return XCTFail("conflicting lengths are invalid")
        }
    }

    func testTagFieldsAreStrippedWhenConfigured() {
        // (Names arrive lowercased from the upstream layer.)
        let headers: HeaderFields = ["surrogate-key": "a b", "cache-tag": "c", "x-other": "1"]
        XCTAssertEqual(response(200, headers, strip: true).fields.map(\.name), ["x-other"])
        XCTAssertEqual(response(200, headers, strip: false).fields.count, 3)
        XCTAssertEqual(builder.tags(response(200, headers, strip: true).received, key: "/r").sorted(), ["a", "b", "c"],
                       "tags are read from the fields as received")
    }

    func testTimingFromDateAndAge() {
        let r = response(200, ["date": "Sun, 06 Nov 1994 08:49:37 GMT", "age": "30"])
        XCTAssertEqual(r.timing.requestTime, 1_000)
        XCTAssertEqual(r.timing.responseTime, 1_002)
        XCTAssertEqual(r.timing.dateValue, 784_111_777)
        XCTAssertEqual(r.timing.ageValue, 30)
        XCTAssertEqual(response(200, ["age": "soon"]).timing.ageValue, 0, "an invalid Age counts as none")
    }

    func testA304RefreshesTheVariantItsEntityTagSelects() throws {
        let one = stored(etag: "\"1\""), two = stored(etag: "\"2\"")
        let r = response(304, ["etag": "\"2\"", "cache-control": "max-age=300", "x-version": "new"])
        let (refreshed, store) = try XCTUnwrap(r.refreshing(one, among: Variants([one, two]), builder: builder))
        XCTAssertEqual(refreshed.etag, "\"2\"")
        XCTAssertEqual(refreshed.lifetime, 300)
        XCTAssertEqual(refreshed.headers["x-version"], "new")
        XCTAssertTrue(store)
    }

    func testA304WithoutAnEntityTagRefreshesTheOneValidated() throws {
        let lm = "Sun, 06 Nov 1994 08:49:37 GMT"
        let validated = stored(etag: nil, lastModified: lm)
        let r = response(304, ["cache-control": "max-age=120"])
        XCTAssertEqual(try XCTUnwrap(r.refreshing(validated, among: Variants([validated]), builder: builder)).response.lifetime, 120)
    }

    func testA304NamingNothingHeldRefreshesNothing() {
        let one = stored(etag: "\"1\"")
        XCTAssertNil(response(304, ["etag": "\"9\""]).refreshing(one, among: Variants([one]), builder: builder))
    }

    func testNoStoreIsObeyedUnlessMustUnderstandComesWithIt() throws {
        // The rule a client fetch and a background refresh once disagreed on.
        let entry = stored(etag: "\"1\"")
        let noStore = response(304, ["etag": "\"1\"", "cache-control": "no-store"])
        XCTAssertFalse(try XCTUnwrap(noStore.refreshing(entry, among: Variants([entry]), builder: builder)).store)
        let understood = response(304, ["etag": "\"1\"", "cache-control": "max-age=60, no-store, must-understand"])
        XCTAssertTrue(try XCTUnwrap(understood.refreshing(entry, among: Variants([entry]), builder: builder)).store)
    }

    private struct Unparsed: Error {}

    private func request(_ method: String, body: Bool = false) throws -> RequestHead {
        var parser = RequestParser()
        let text = "\(method) /r HTTP/1.1\r\nHost: example\r\n" + (body ? "Content-Length: 1\r\n\r\nx" : "\r\n")
        guard case .complete(let head, _) = Array(text.utf8).withUnsafeBytes({ parser.parse($0) }) else { throw Unparsed() }
        return head
    }

    private func effect(_ method: String, _ status: Int, _ headers: HeaderFields = ["cache-control": "max-age=60"],
                        largest: Int = 1 << 20, contentLocationKey: String? = nil) throws -> String {
        let lookup = (method == "GET" || method == "HEAD")
        switch response(status, headers).cacheEffect(of: try request(method, body: !lookup), isCacheLookup: lookup,
                                                     builder: builder, largestBody: largest, contentLocationKey: contentLocationKey) {
        case .store: return "store"
        case .invalidateAndStore: return "invalidate+store"
        case .removeSuperseded: return "remove"
        case .updateStored: return "update"
        case .invalidate: return "invalidate"
        case .none: return "none"
        }
    }

    func testWhatAResponseDoesToTheCache() throws {
        XCTAssertEqual(try effect("GET", 200), "store")
        XCTAssertEqual(try effect("GET", 200, ["cache-control": "no-store"]), "remove",
                       "the origin forbids keeping its current answer: what it supersedes goes")
        XCTAssertEqual(try effect("GET", 200, ["cache-control": "max-age=60, private"]), "remove", "private, in a shared cache")
        XCTAssertEqual(try effect("GET", 200, ["cache-control": "no-cache"]), "store", "(kept, validated before each use)")
        XCTAssertEqual(try effect("GET", 200, [:]), "none", "no freshness, nothing forbidden: what is stored stays")
        XCTAssertEqual(try effect("GET", 200, ["cache-control": "max-age=60", "content-length": "2000"], largest: 1000), "none",
                       "too large for every tier: what is stored stays")
        XCTAssertEqual(try effect("GET", 503, [:]), "none", "an error without freshness: not stored, and what is stored stays")
        XCTAssertEqual(try effect("GET", 404, ["cache-control": "no-store"]), "none", "an error leaves what is stored")
        XCTAssertEqual(try effect("GET", 206, ["cache-control": "no-store"]), "none")
        XCTAssertEqual(try effect("HEAD", 200), "update", "section 4.3.5")
        XCTAssertEqual(try effect("HEAD", 404), "none")
        XCTAssertEqual(try effect("POST", 201), "invalidate", "section 4.4")
        XCTAssertEqual(try effect("POST", 500), "none", "only a successful unsafe request invalidates")
    }

    /// RFC 9110 section 9.3.3: a POST response is a representation of its
    /// target, for later GETs, when its Content-Location names the target
    /// and it has explicit freshness.
    func testAPostResponseNamingItsTargetWithExplicitFreshnessIsStoredForGets() throws {
        XCTAssertEqual(try effect("POST", 200, contentLocationKey: "/r"), "invalidate+store")
        XCTAssertEqual(try effect("POST", 203, contentLocationKey: "/r"), "invalidate+store")
        XCTAssertEqual(try effect("POST", 200, ["expires": "Thu, 01 Jan 2099 00:00:00 GMT"], contentLocationKey: "/r"),
                       "invalidate+store")
        XCTAssertEqual(try effect("POST", 200), "invalidate", "no Content-Location")
        XCTAssertEqual(try effect("POST", 200, contentLocationKey: "/other"), "invalidate", "another resource")
        XCTAssertEqual(try effect("POST", 201, contentLocationKey: "/r"), "invalidate")
        XCTAssertEqual(try effect("POST", 200, ["last-modified": "Thu, 01 Jan 2015 00:00:00 GMT"], contentLocationKey: "/r"),
                       "invalidate", "heuristic freshness is not explicit")
        XCTAssertEqual(try effect("POST", 200, ["cache-control": "max-age=0"], contentLocationKey: "/r"), "invalidate")
        XCTAssertEqual(try effect("POST", 200, ["cache-control": "max-age=60, no-store"], contentLocationKey: "/r"), "invalidate")
        XCTAssertEqual(try effect("POST", 200, ["cache-control": "max-age=60, private"], contentLocationKey: "/r"), "invalidate")
        XCTAssertEqual(try effect("POST", 200, ["cache-control": "max-age=60", "content-length": "2000"], largest: 1000,
                                  contentLocationKey: "/r"), "invalidate", "too large for every tier")
        XCTAssertEqual(try effect("PUT", 200, contentLocationKey: "/r"), "invalidate", "only POST")
    }

    func testAHeadAnswerRefreshesTheVariantItSelectsOrRemovesItWhenTheLengthChanged() {
        let one = stored(etag: "\"1\""), two = stored(etag: "\"2\"")
        guard case .replace(let refreshed) = response(200, ["etag": "\"2\"", "cache-control": "max-age=900", "content-length": "0"])
            .headUpdate(of: Variants([one, two]), builder: builder) else { return XCTFail("the second variant is refreshed") }
        XCTAssertEqual(refreshed.etag, "\"2\"")
        XCTAssertEqual(refreshed.lifetime, 900)
        guard case .remove = response(200, ["etag": "\"1\"", "content-length": "7"]).headUpdate(of: Variants([one]), builder: builder)
        else { return XCTFail("another length: the stored response is outdated") }
        guard case .none = response(200, ["etag": "\"9\""]).headUpdate(of: Variants([one]), builder: builder)
        else { return XCTFail("selects nothing") }
        guard case .none = response(200, ["etag": "\"1\""]).headUpdate(of: Variants(), builder: builder)
        else { return XCTFail("nothing stored") }
    }
}
