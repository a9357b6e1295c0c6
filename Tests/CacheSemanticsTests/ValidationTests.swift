import HTTPHeaders
import XCTest
@testable import CacheSemantics

/// RFC 9110 section 13 and RFC 9111 sections 3.2, 4.1 and 4.3.
final class ValidationTests: XCTestCase {
    func testEntityTagLists() {
        XCTAssertEqual(Validation.entityTags("\"a\", W/\"b\",\"c,d\""), ["\"a\"", "W/\"b\"", "\"c,d\""])
        XCTAssertNil(Validation.entityTags("*"))
        XCTAssertTrue(Validation.weakMatch("W/\"x\"", "\"x\""))
        XCTAssertFalse(Validation.weakMatch("\"x\"", "\"y\""))
    }

    /// RFC 9110 section 13.2.2: If-None-Match first, If-Modified-Since only without it.
    func testClientConditionals() {
        let lm = "Sun, 06 Nov 1994 08:49:37 GMT"
        XCTAssertTrue(Validation.clientNotModified(ifNoneMatch: "\"1\", \"2\"", ifModifiedSince: nil, etag: "\"2\"", lastModified: nil, dateValue: nil))
        XCTAssertTrue(Validation.clientNotModified(ifNoneMatch: "W/\"2\"", ifModifiedSince: nil, etag: "\"2\"", lastModified: nil, dateValue: nil))
        XCTAssertFalse(Validation.clientNotModified(ifNoneMatch: "\"3\"", ifModifiedSince: lm, etag: "\"2\"", lastModified: lm, dateValue: nil))
        XCTAssertTrue(Validation.clientNotModified(ifNoneMatch: "*", ifModifiedSince: nil, etag: nil, lastModified: nil, dateValue: nil))
        XCTAssertTrue(Validation.clientNotModified(ifNoneMatch: nil, ifModifiedSince: lm, etag: nil, lastModified: lm, dateValue: nil))
        XCTAssertFalse(Validation.clientNotModified(ifNoneMatch: nil, ifModifiedSince: "Sat, 05 Nov 1994 08:49:37 GMT",
                                                    etag: nil, lastModified: lm, dateValue: nil))
        XCTAssertFalse(Validation.clientNotModified(ifNoneMatch: nil, ifModifiedSince: "garbage", etag: nil, lastModified: lm, dateValue: nil))
        // RFC 9111 section 4.3.2: without Last-Modified, the stored Date stands in.
        let date = HTTPDate.parse(lm)!
        XCTAssertTrue(Validation.clientNotModified(ifNoneMatch: nil, ifModifiedSince: "Sun, 06 Nov 1994 09:39:37 GMT", etag: nil,
                                                   lastModified: nil, dateValue: date), "stored Date older than the IMS date")
        XCTAssertTrue(Validation.clientNotModified(ifNoneMatch: nil, ifModifiedSince: lm, etag: nil, lastModified: nil, dateValue: date))
        XCTAssertFalse(Validation.clientNotModified(ifNoneMatch: nil, ifModifiedSince: "Sun, 06 Nov 1994 07:59:37 GMT", etag: nil,
                                                    lastModified: nil, dateValue: date), "it may have changed after the IMS date")
    }

    /// RFC 9111 section 3.2: a 304's fields replace the stored ones, except framing.
    func testMergeFromNotModified() {
        let stored: HeaderFields = ["etag": "\"1\"", "cache-control": "max-age=1", "x-a": "old",
                                    "content-length": "10", "content-type": "text/plain"]
        let update: HeaderFields = ["cache-control": "max-age=100", "x-a": "new", "x-b": "added",
                                    "content-length": "0"]
        let merged = Validation.merge(stored: stored, update: update)
        func value(_ n: String) -> [String] { merged.filter { $0.name == n }.map(\.value) }
        XCTAssertEqual(value("cache-control"), ["max-age=100"])
        XCTAssertEqual(value("x-a"), ["new"])
        XCTAssertEqual(value("x-b"), ["added"])
        XCTAssertEqual(value("content-length"), ["10"])
        XCTAssertEqual(value("etag"), ["\"1\""])
    }

    /// RFC 9111 section 4.3.4: which stored response a 304 selects.
    func testSelectingTheValidatedVariant() {
        let candidates: [(etag: String?, lastModified: String?)] = [("\"a\"", nil), ("\"b\"", "x"), (nil, "y")]
        XCTAssertEqual(Validation.selectValidated(etag: "\"b\"", lastModified: nil, candidates: candidates), 1)
        XCTAssertNil(Validation.selectValidated(etag: "\"z\"", lastModified: nil, candidates: candidates))
        XCTAssertEqual(Validation.selectValidated(etag: nil, lastModified: "y", candidates: candidates), 2)
        XCTAssertNil(Validation.selectValidated(etag: nil, lastModified: nil, candidates: candidates))
        XCTAssertNil(Validation.selectValidated(etag: nil, lastModified: nil, candidates: [("\"a\"", nil)]))
        XCTAssertEqual(Validation.selectValidated(etag: nil, lastModified: nil, candidates: [(nil, nil)]), 0)
    }
}

/// RFC 9111 section 4: choosing a stored response for a request.
final class LookupTests: XCTestCase {
    struct Stored: StoredResponseFacts {
        var lifetime: Int
        var correctedInitialAge = 0
        var timing = ResponseTiming(requestTime: 1000, responseTime: 1000, dateValue: 1000, ageValue: 0)
        var cacheControl = CacheControl()
        var varyNames: [String] = []
        var varyValues: [String?] = []
        var contentLanguage: String?
    }

    private func request(_ cc: String? = nil, pragma: Bool = false, _ fields: [String: String] = [:]) -> RequestFacts {
        RequestFacts(cacheControl: CacheControl(cc), pragmaNoCache: pragma) { fields[$0] }
    }

    func testMissFreshAndStale() {
        XCTAssertEqual(Lookup.decide(request(), [Stored](), now: 1000), .miss(varyMiss: false))
        XCTAssertEqual(Lookup.decide(request(), [Stored(lifetime: 60)], now: 1010), .fresh(index: 0, age: 10, ttl: 50))
        XCTAssertEqual(Lookup.decide(request(), [Stored(lifetime: 60)], now: 1070),
                       .stale(index: 0, age: 70, ttl: -10, requestForced: false))
    }

    /// Section 5.2.1: request directives force validation ("fwd=request").
    func testRequestDirectivesForceValidation() {
        XCTAssertEqual(Lookup.decide(request("no-cache"), [Stored(lifetime: 60)], now: 1010),
                       .stale(index: 0, age: 10, ttl: 50, requestForced: true))
        XCTAssertEqual(Lookup.decide(request(pragma: true), [Stored(lifetime: 60)], now: 1010),
                       .stale(index: 0, age: 10, ttl: 50, requestForced: true))
        // Pragma is ignored when Cache-Control is present (section 5.4).
        XCTAssertEqual(Lookup.decide(request("max-stale=5", pragma: true), [Stored(lifetime: 60)], now: 1010),
                       .fresh(index: 0, age: 10, ttl: 50))
        XCTAssertEqual(Lookup.decide(request("max-age=5"), [Stored(lifetime: 60)], now: 1010),
                       .stale(index: 0, age: 10, ttl: 50, requestForced: true))
    }

    /// Section 4.1: the most recent matching variant, else a vary miss.
    func testVariantSelection() {
        let en = Stored(lifetime: 60, varyNames: ["accept-language"], varyValues: ["en"])
        let fr = Stored(lifetime: 30, varyNames: ["accept-language"], varyValues: ["fr"])
        XCTAssertEqual(Lookup.decide(request(nil, ["accept-language": "fr"]), [en, fr], now: 1000), .fresh(index: 1, age: 0, ttl: 30))
        XCTAssertEqual(Lookup.decide(request(nil, ["accept-language": "de"]), [en, fr], now: 1000), .miss(varyMiss: true))
        let absent = Stored(lifetime: 10, varyNames: ["accept-language"], varyValues: [nil])
        XCTAssertEqual(Lookup.decide(request(), [en, absent], now: 1000), .fresh(index: 1, age: 0, ttl: 10))
    }

    /// RFC 9110 section 12.5.4 (cache-tests vary-normalise-lang-select): a
    /// stored response in the language a request prefers most answers it,
    /// whatever Accept-Language stored it.
    func testAcceptLanguageSelectsByContentLanguageAndQValues() {
        let de = Stored(lifetime: 60, varyNames: ["accept-language"], varyValues: [Vary.normalize("en, de", field: "accept-language")],
                        contentLanguage: "de")
        func decide(_ acceptLanguage: String?) -> LookupOutcome {
            Lookup.decide(request(nil, acceptLanguage.map { ["accept-language": $0] } ?? [:]), [de], now: 1000)
        }
        XCTAssertEqual(decide("fr;q=0.5, de;q=1.0"), .fresh(index: 0, age: 0, ttl: 60))
        XCTAssertEqual(decide("DE"), .fresh(index: 0, age: 0, ttl: 60), "case does not matter")
        XCTAssertEqual(decide("fr;q=0.5, de, en"), .fresh(index: 0, age: 0, ttl: 60), "one of the most preferred")
        XCTAssertEqual(decide("fr, de;q=0.9"), .miss(varyMiss: true), "French is preferred: the origin may have it")
        XCTAssertEqual(decide("*"), .miss(varyMiss: true), "a wildcard selects nothing")
        XCTAssertEqual(decide("de;q=0"), .miss(varyMiss: true), "not acceptable")
        XCTAssertEqual(decide(nil), .miss(varyMiss: true))
        XCTAssertTrue(Vary.languageSelects("de", contentLanguage: "de-CH"), "a range matches the tags it prefixes")
        XCTAssertFalse(Vary.languageSelects("de-CH", contentLanguage: "de"), "not the other way round")
        XCTAssertFalse(Vary.languageSelects("de", contentLanguage: "de, en"), "a response in several languages")
        XCTAssertFalse(Vary.languageSelects("fr;q=2, de", contentLanguage: "fr"), "an invalid qvalue counts as 0")
        var noLanguage = de
        noLanguage.contentLanguage = nil
        XCTAssertEqual(Lookup.decide(request(nil, ["accept-language": "de"]), [noLanguage], now: 1000), .miss(varyMiss: true))
    }

    /// RFC 5861: stale-while-revalidate within its window, not past it, not with must-revalidate.
    func testStaleWhileRevalidate() {
        let swr = Stored(lifetime: 10, cacheControl: CacheControl("max-age=10, stale-while-revalidate=30"))
        XCTAssertEqual(Lookup.decide(request(), [swr], now: 1020), .staleWhileRevalidate(index: 0, age: 20, ttl: -10))
        XCTAssertEqual(Lookup.decide(request(), [swr], now: 1050), .stale(index: 0, age: 50, ttl: -40, requestForced: false))
        XCTAssertEqual(Lookup.decide(request("no-cache"), [swr], now: 1020), .stale(index: 0, age: 20, ttl: -10, requestForced: false))
        let mr = Stored(lifetime: 10, cacheControl: CacheControl("max-age=10, stale-while-revalidate=30, must-revalidate"))
        XCTAssertEqual(Lookup.decide(request(), [mr], now: 1020), .stale(index: 0, age: 20, ttl: -10, requestForced: false))
    }

    /// The configured grace: like stale-while-revalidate, past the response's own window, within what serving stale allows.
    func testConfiguredGrace() {
        let plain = Stored(lifetime: 10, cacheControl: CacheControl("max-age=10"))
        XCTAssertEqual(Lookup.decide(request(), [plain], now: 1050, grace: 60), .staleWithinGrace(index: 0, age: 50, ttl: -40))
        XCTAssertEqual(Lookup.decide(request(), [plain], now: 1080, grace: 60), .stale(index: 0, age: 80, ttl: -70, requestForced: false))
        XCTAssertEqual(Lookup.decide(request(), [plain], now: 1050), .stale(index: 0, age: 50, ttl: -40, requestForced: false), "0: off")
        XCTAssertEqual(Lookup.decide(request("no-cache"), [plain], now: 1050, grace: 60), .stale(index: 0, age: 50, ttl: -40, requestForced: false))
        let swr = Stored(lifetime: 10, cacheControl: CacheControl("max-age=10, stale-while-revalidate=30"))
        XCTAssertEqual(Lookup.decide(request(), [swr], now: 1020, grace: 60), .staleWhileRevalidate(index: 0, age: 20, ttl: -10), "its own first")
        for forbidding in ["max-age=10, must-revalidate", "max-age=10, no-cache", "s-maxage=10"] {
            let stored = Stored(lifetime: 10, cacheControl: CacheControl(forbidding))
            XCTAssertEqual(Lookup.decide(request(), [stored], now: 1050, grace: 60), .stale(index: 0, age: 50, ttl: -40, requestForced: false), forbidding)
        }
    }
}

/// RFC 9111 section 4.2.4 and RFC 5861 section 4.
final class StaleTests: XCTestCase {
    func testStaleIfErrorWindow() {
        let cc = CacheControl("max-age=10, stale-if-error=60")
        XCTAssertTrue(Stale.mayServeOnError(lifetime: 10, currentAge: 50, response: cc, request: CacheControl(), shared: true))
        XCTAssertFalse(Stale.mayServeOnError(lifetime: 10, currentAge: 80, response: cc, request: CacheControl(), shared: true))
        XCTAssertTrue(Stale.mayServeOnError(lifetime: 10, currentAge: 80, response: CacheControl("max-age=10"),
                                            request: CacheControl("stale-if-error=100"), shared: true))
        XCTAssertFalse(Stale.mayServeOnError(lifetime: 10, currentAge: 20, response: CacheControl("max-age=10"),
                                             request: CacheControl(), shared: true))
        XCTAssertFalse(Stale.mayServeOnError(lifetime: 10, currentAge: 20, response: CacheControl("max-age=10, stale-if-error=60, must-revalidate"),
                                             request: CacheControl(), shared: true))
        XCTAssertFalse(Stale.mayServeOnError(lifetime: 10, currentAge: 20, response: CacheControl("s-maxage=10, stale-if-error=60"),
                                             request: CacheControl(), shared: true))
        XCTAssertTrue(Stale.mayServeOnError(lifetime: 10, currentAge: 20, response: CacheControl("s-maxage=10, stale-if-error=60"),
                                            request: CacheControl(), shared: false))
        XCTAssertTrue(Stale.isErrorStatus(503))
        XCTAssertFalse(Stale.isErrorStatus(404))
    }
}

/// RFC 9110 section 14: ranges served from a stored response.
final class ByteRangeTests: XCTestCase {
    private func eval(_ range: String?, ifRange: String? = nil, length: Int = 100) -> ByteRange.Outcome {
        ByteRange.evaluate(range: range, ifRange: ifRange, length: length, etag: "\"e\"",
                           lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    /// Several ranges go upstream only when modest (RFC 9110 section
    /// 14.2): ascending, apart, well formed, at most 16.
    func testWhichSetsOfSeveralRangesAreForwarded() {
        XCTAssertTrue(ByteRange.mayForwardSeveral("bytes=0-9, 10-19, 50-59"))
        XCTAssertTrue(ByteRange.mayForwardSeveral("bytes=0-9,20-"))
        XCTAssertTrue(ByteRange.mayForwardSeveral("bytes=0-9, -5"))
        let sixteen = (0..<16).map { "\($0 * 10)-\($0 * 10 + 4)" }.joined(separator: ",")
        XCTAssertTrue(ByteRange.mayForwardSeveral("bytes=" + sixteen))
        XCTAssertFalse(ByteRange.mayForwardSeveral("bytes=" + sixteen + ",500-509"), "more than 16")
        XCTAssertFalse(ByteRange.mayForwardSeveral("bytes=0-9,5-14"), "overlapping")
        XCTAssertFalse(ByteRange.mayForwardSeveral("bytes=0-,0-,0-"), "overlapping from the start")
        XCTAssertFalse(ByteRange.mayForwardSeveral("bytes=50-59,0-9"), "not ascending")
        XCTAssertFalse(ByteRange.mayForwardSeveral("bytes=-5,0-9"), "a suffix not last")
        XCTAssertFalse(ByteRange.mayForwardSeveral("bytes=20-,30-39"), "after an open range")
        XCTAssertFalse(ByteRange.mayForwardSeveral("bytes=9-0,10-19"), "backwards")
        XCTAssertFalse(ByteRange.mayForwardSeveral("bytes=0-9,,20-29"), "an empty set")
        XCTAssertFalse(ByteRange.mayForwardSeveral("bytes=0-9,x"))
        XCTAssertFalse(ByteRange.mayForwardSeveral("items=0-9,10-19"), "another unit")
        XCTAssertFalse(ByteRange.mayForwardSeveral("bytes=0-9,10-99999999999999999999"), "a number too large")
        XCTAssertFalse(ByteRange.mayForwardSeveral("bytes=0-9,99999999999999999999-"), "a number too large")
        XCTAssertFalse(ByteRange.mayForwardSeveral("bytes=0-9,-99999999999999999999"), "a number too large")
    }

    func testSingleRanges() {
        XCTAssertEqual(eval(nil), .full)
        XCTAssertEqual(eval("bytes=0-9"), .partial(first: 0, last: 9))
        XCTAssertEqual(eval("bytes=90-"), .partial(first: 90, last: 99))
        XCTAssertEqual(eval("bytes=-10"), .partial(first: 90, last: 99))
        XCTAssertEqual(eval("bytes=-500"), .partial(first: 0, last: 99))
        XCTAssertEqual(eval("bytes=50-5000"), .partial(first: 50, last: 99))
        XCTAssertEqual(eval("bytes=100-"), .unsatisfiable)
        XCTAssertEqual(eval("bytes=-0"), .unsatisfiable)
        // Numbers past any length (section 14.1.2): a last-pos or suffix-length means the end, a first-pos is beyond it.
        XCTAssertEqual(eval("bytes=10-99999999999999999999"), .partial(first: 10, last: 99))
        XCTAssertEqual(eval("bytes=-" + String(repeating: "9", count: 400)), .partial(first: 0, last: 99))
        XCTAssertEqual(eval("bytes=99999999999999999999-"), .unsatisfiable)
        XCTAssertEqual(eval("bytes=99999999999999999999-99999999999999999999"), .unsatisfiable)
        XCTAssertEqual(eval("bytes=00000000000000000000000005-9"), .partial(first: 5, last: 9), "leading zeros")
        XCTAssertEqual(eval("bytes=99999999999999999999-5"), .full, "backwards")
    }

    func testIgnoredRanges() {
        XCTAssertEqual(eval("bytes=0-1,5-6"), .full)  // multiple ranges: the whole representation is allowed
        XCTAssertEqual(eval("items=0-1"), .full)
        XCTAssertEqual(eval("bytes=9-1"), .full)
        XCTAssertEqual(eval("bytes=a-b"), .full)
    }

    /// Section 13.1.5: If-Range with a strong ETag or the exact Last-Modified.
    func testIfRange() {
        XCTAssertEqual(eval("bytes=0-1", ifRange: "\"e\""), .partial(first: 0, last: 1))
        XCTAssertEqual(eval("bytes=0-1", ifRange: "\"other\""), .full)
        XCTAssertEqual(eval("bytes=0-1", ifRange: "W/\"e\""), .full)
        XCTAssertEqual(eval("bytes=0-1", ifRange: "Sun, 06 Nov 1994 08:49:37 GMT"), .partial(first: 0, last: 1))
        XCTAssertEqual(eval("bytes=0-1", ifRange: "Sun, 06 Nov 1994 08:49:38 GMT"), .full)
    }
}

/// RFC 9111 section 4.4: Location and Content-Location targets.
final class InvalidationTests: XCTestCase {
    private func key(_ reference: String, prefix: String = "") -> String? {
        Invalidation.key(for: reference, requestKey: "/test/post?x=1", upstreamAuthority: "origin:9000",
                         upstreamPathPrefix: prefix, clientAuthority: "larder:8080")
    }

    func testSameOriginReferences() {
        XCTAssertEqual(key("/a/b"), "/a/b")
        XCTAssertEqual(key("location_target"), "/test/location_target")
        XCTAssertEqual(key("../up?q=2"), "/up?q=2")
        XCTAssertEqual(key("http://origin:9000/x?y"), "/x?y")
        XCTAssertEqual(key("HTTP://LARDER:8080/z"), "/z")
        XCTAssertEqual(key("//origin:9000"), "/")
        XCTAssertEqual(key("http://origin:9000/api/x", prefix: "/api"), "/x")
    }

    func testOtherOriginsAreNotInvalidated() {
        XCTAssertNil(key("http://elsewhere/x"))
        XCTAssertNil(key("https://origin:9001/x"))
        XCTAssertNil(key("http://origin:9000/other/x", prefix: "/api"))
    }
}

/// RFC 9213 with RFC 8941 dictionaries.
final class TargetedCacheControlTests: XCTestCase {
    func testValidDictionaries() {
        let cc = CacheControl(targeted: "max-age=3600, no-store;foo=1, foobar, s-maxage=99999999999")
        XCTAssertEqual(cc?.maxAge, 3600)
        XCTAssertEqual(cc?.noStore, true)
        XCTAssertEqual(cc?.sMaxAge, 2_147_483_648)
        XCTAssertEqual(CacheControl(targeted: "private")?.isPrivate, true)
        XCTAssertEqual(CacheControl(targeted: "max-age=10, max-age=20")?.maxAge, 20)  // last wins in a dictionary
    }

    func testInvalidFieldsAreIgnoredWhole() {
        XCTAssertNil(CacheControl(targeted: "max-age=10000, &&&&&"))
        XCTAssertNil(CacheControl(targeted: ""))
        XCTAssertNil(CacheControl(targeted: "MaX-aGe=3600"))
        XCTAssertNil(CacheControl(targeted: "max-age =100"))
        XCTAssertNil(CacheControl(targeted: "max-age=1,"))
    }

    func testWrongTypesAreIgnoredAlone() {
        let cc = CacheControl(targeted: "max-age=\"10000\", no-store=?0, private=1")
        XCTAssertNotNil(cc)
        XCTAssertNil(cc?.maxAge)
        XCTAssertEqual(cc?.noStore, false)
        XCTAssertEqual(cc?.isPrivate, false)
        XCTAssertNil(CacheControl(targeted: "max-age=-5")?.maxAge)
    }
}

/// The request policies of docs/routes-and-policies.md as pure decisions.
final class RequestPolicyTests: XCTestCase {
    func testNamesAndAliasesAreCaseInsensitive() {
        XCTAssertEqual(RequestPolicy(name: "returnCacheDataElseLoad"), .returnCacheDataElseLoad)
        XCTAssertEqual(RequestPolicy(name: "RETURNCACHEDATAELSELOAD"), .returnCacheDataElseLoad)
        XCTAssertEqual(RequestPolicy(name: "networkOnly"), .reloadIgnoringLocalCacheData)
        XCTAssertEqual(RequestPolicy(name: " cacheonly "), .returnCacheDataDontLoad)
        XCTAssertEqual(RequestPolicy(name: "cacheElseFetch"), .returnCacheDataElseLoad)
        XCTAssertNil(RequestPolicy(name: "sometimes"))
        XCTAssertEqual(RequestPolicy.validNames.count, 11)
    }

    func testActions() {
        let miss = LookupOutcome.miss(varyMiss: false)
        let fresh = LookupOutcome.fresh(index: 0, age: 1, ttl: 59)
        let stale = LookupOutcome.stale(index: 0, age: 90, ttl: -30, requestForced: false)
        XCTAssertEqual(RequestPolicy.useProtocolCachePolicy.action(for: stale), .followProtocol(stale))
        XCTAssertEqual(RequestPolicy.reloadIgnoringLocalCacheData.action(for: fresh), .forward(validate: nil, noCacheUpstream: false, fallback: nil))
        XCTAssertEqual(RequestPolicy.reloadIgnoringLocalAndRemoteCacheData.action(for: fresh), .forward(validate: nil, noCacheUpstream: true, fallback: nil))
        XCTAssertEqual(RequestPolicy.reloadRevalidatingCacheData.action(for: fresh), .forward(validate: 0, noCacheUpstream: false, fallback: nil))
        XCTAssertEqual(RequestPolicy.reloadRevalidatingCacheData.action(for: miss), .forward(validate: nil, noCacheUpstream: false, fallback: nil))
        XCTAssertEqual(RequestPolicy.returnCacheDataElseLoad.action(for: stale), .serveStored(index: 0, age: 90, ttl: -30))
        XCTAssertEqual(RequestPolicy.returnCacheDataElseLoad.action(for: miss), .followProtocol(miss))
        XCTAssertEqual(RequestPolicy.returnCacheDataDontLoad.action(for: stale), .serveStored(index: 0, age: 90, ttl: -30))
        XCTAssertEqual(RequestPolicy.returnCacheDataDontLoad.action(for: miss), .gatewayTimeout)
        XCTAssertEqual(RequestPolicy.cacheThenFetch.action(for: stale), .serveStoredAndRefresh(index: 0, age: 90, ttl: -30))
        XCTAssertEqual(RequestPolicy.cacheThenFetch.action(for: miss), .followProtocol(miss))
        XCTAssertEqual(RequestPolicy.networkElseCache.action(for: stale), .forward(validate: nil, noCacheUpstream: false, fallback: 0))
        XCTAssertEqual(RequestPolicy.networkElseCache.action(for: miss), .forward(validate: nil, noCacheUpstream: false, fallback: nil))
    }
}

/// Stored 206 pieces (RFC 9111 sections 3.3 and 3.4).
final class PartialContentTests: XCTestCase {
    private typealias Piece = PartialContent.Piece

    func testContentRangeOfOneRangeWithAKnownLength() {
        XCTAssertEqual(PartialContent.piece(contentRange: "bytes 4-9/10"), Piece(first: 4, last: 9, length: 10))
        XCTAssertEqual(PartialContent.piece(contentRange: " Bytes 0-0/1 "), Piece(first: 0, last: 0, length: 1))
        for bad in [nil, "", "bytes 4-9/*", "bytes */10", "bytes 9-4/10", "bytes 4-10/10", "items 0-1/2", "bytes 0-4/10, bytes 5-9/10",
                    "bytes -1-4/10", "bytes 0-4", "bytes 0x1-4/10", "bytes 0-99999999999999999999/100000000000000000000"] {
            XCTAssertNil(PartialContent.piece(contentRange: bad), bad ?? "nil")
        }
        XCTAssertEqual(Piece(first: 4, last: 9, length: 10).contentRange, "bytes 4-9/10")
        XCTAssertTrue(Piece(first: 0, last: 9, length: 10).isWhole)
        XCTAssertFalse(Piece(first: 1, last: 9, length: 10).isWhole)
    }

    func testAPieceAnswersRangesItHolds() {
        let piece = Piece(first: 4, last: 9, length: 10)
        func answer(_ range: String?, ifRange: String? = nil) -> PartialContent.Answer {
            PartialContent.answer(range: range, ifRange: ifRange, piece: piece, etag: "\"e\"", lastModified: nil)
        }
        XCTAssertEqual(answer("bytes=-5"), .partial(first: 5, last: 9))
        XCTAssertEqual(answer("bytes=6-8"), .partial(first: 6, last: 8))
        XCTAssertEqual(answer("bytes=6-"), .partial(first: 6, last: 9))
        XCTAssertEqual(answer("bytes=4-100"), .partial(first: 4, last: 9))
        XCTAssertEqual(answer("bytes=10-"), .unsatisfiable)
        XCTAssertEqual(answer("bytes=3-5"), .notHeld)
        XCTAssertEqual(answer("bytes=-7"), .notHeld)
        XCTAssertEqual(answer(nil), .notHeld)
        XCTAssertEqual(answer("bytes=0-1,5-6"), .notHeld, "several ranges: not answered from a piece")
        XCTAssertEqual(answer("bytes=5-6", ifRange: "\"other\""), .notHeld)
        XCTAssertEqual(answer("bytes=5-6", ifRange: "\"e\""), .partial(first: 5, last: 6))
    }

    func testPiecesOfOneRepresentationThatTouchJoin() {
        let a = Piece(first: 0, last: 4, length: 10), b = Piece(first: 5, last: 9, length: 10)
        XCTAssertTrue(PartialContent.mayJoin(a, etag: "\"e\"", b, etag: "\"e\""))
        XCTAssertEqual(PartialContent.joined(a, b), Piece(first: 0, last: 9, length: 10))
        XCTAssertTrue(PartialContent.mayJoin(Piece(first: 2, last: 7, length: 10), etag: "\"e\"", b, etag: "\"e\""), "overlap")
        XCTAssertFalse(PartialContent.mayJoin(a, etag: "\"e\"", Piece(first: 6, last: 9, length: 10), etag: "\"e\""), "a gap")
        XCTAssertFalse(PartialContent.mayJoin(a, etag: "\"e\"", b, etag: "\"f\""), "another representation")
        XCTAssertFalse(PartialContent.mayJoin(a, etag: "W/\"e\"", b, etag: "W/\"e\""), "a weak tag may name other bytes")
        XCTAssertFalse(PartialContent.mayJoin(a, etag: nil, b, etag: nil))
        XCTAssertFalse(PartialContent.mayJoin(a, etag: "\"e\"", Piece(first: 5, last: 10, length: 11), etag: "\"e\""))
    }
}

extension PartialContentTests {
    func testTheRestOfAPieceFromByteZeroIsAskedWithIfRange() {
        let piece = PartialContent.Piece(first: 0, last: 39, length: 100)
        XCTAssertEqual(PartialContent.restRequest(for: piece, etag: "\"e\"")?.range, "bytes=40-")
        XCTAssertEqual(PartialContent.restRequest(for: piece, etag: "\"e\"")?.ifRange, "\"e\"")
        XCTAssertEqual(PartialContent.restRequest(for: piece, etag: "W/\"e\"")?.range, "bytes=40-")
        XCTAssertNil(PartialContent.restRequest(for: piece, etag: "W/\"e\"")?.ifRange, "If-Range needs a strong tag")
        XCTAssertEqual(PartialContent.restRequest(for: piece, etag: nil)?.range, "bytes=40-", "without one, the rest is asked all the same")
        XCTAssertNil(PartialContent.restRequest(for: piece, etag: nil)?.ifRange)
        XCTAssertEqual(PartialContent.restRequest(for: PartialContent.Piece(first: 5, last: 39, length: 100), etag: "\"e\"")?.range,
                       "bytes=0-4,40-", "a piece in the middle lacks two ranges")
        XCTAssertNil(PartialContent.restRequest(for: PartialContent.Piece(first: 0, last: 99, length: 100), etag: "\"e\""))
        XCTAssertTrue(PartialContent.isRest(PartialContent.Piece(first: 40, last: 99, length: 100), of: piece))
        XCTAssertFalse(PartialContent.isRest(PartialContent.Piece(first: 41, last: 99, length: 100), of: piece))
        XCTAssertFalse(PartialContent.isRest(PartialContent.Piece(first: 40, last: 98, length: 100), of: piece))
        XCTAssertFalse(PartialContent.isRest(PartialContent.Piece(first: 40, last: 100, length: 101), of: piece))
    }

    /// A piece that ends the representation (a seek to the end) lacks its
    /// start: that is asked for, as a closed range.
    func testTheStartOfAPieceThatEndsTheRepresentationIsAskedWithIfRange() {
        let piece = PartialContent.Piece(first: 60, last: 99, length: 100)
        XCTAssertEqual(PartialContent.restRequest(for: piece, etag: "\"e\"")?.range, "bytes=0-59")
        XCTAssertEqual(PartialContent.restRequest(for: piece, etag: "\"e\"")?.ifRange, "\"e\"")
        XCTAssertTrue(PartialContent.isRest(PartialContent.Piece(first: 0, last: 59, length: 100), of: piece))
        XCTAssertFalse(PartialContent.isRest(PartialContent.Piece(first: 0, last: 60, length: 100), of: piece))
        XCTAssertFalse(PartialContent.isRest(PartialContent.Piece(first: 1, last: 59, length: 100), of: piece))
        XCTAssertTrue(PartialContent.completes(piece, etag: "\"v1\"", contentRange: "bytes 0-59/100", restETag: "\"v1\""))
        XCTAssertFalse(PartialContent.completes(piece, etag: "\"v1\"", contentRange: "bytes 0-59/100", restETag: "\"v2\""))
        XCTAssertEqual(PartialContent.rest(of: PartialContent.Piece(first: 99, last: 99, length: 100)),
                       PartialContent.Piece(first: 0, last: 98, length: 100))
    }

    /// A client's range that reaches past a stored piece: only the bytes
    /// the piece lacks are asked, when they are one range.
    func testWhatAPieceLacksOfARangeIsAskedWhenItIsOneRange() {
        typealias Piece = PartialContent.Piece
        let start = Piece(first: 0, last: 99, length: 1_000), later = Piece(first: 100, last: 199, length: 1_000)
        func wanted(_ first: Int, _ last: Int) -> Piece { Piece(first: first, last: last, length: 1_000) }
        XCTAssertEqual(PartialContent.rest(of: start, wanted: wanted(50, 199)), wanted(100, 199))
        XCTAssertEqual(PartialContent.restRequest(for: start, wanted: wanted(50, 199), etag: "\"e\"")?.range, "bytes=100-199")
        XCTAssertEqual(PartialContent.restRequest(for: start, wanted: wanted(50, 999), etag: "\"e\"")?.range, "bytes=100-",
                       "to the end: an open range")
        XCTAssertEqual(PartialContent.rest(of: later, wanted: wanted(50, 149)), wanted(50, 99), "the piece holds its end")
        XCTAssertEqual(PartialContent.restRequest(for: later, wanted: wanted(50, 149), etag: nil)?.range, "bytes=50-99")
        XCTAssertNil(PartialContent.rest(of: later, wanted: wanted(50, 250)), "the piece inside: two ranges lack")
        XCTAssertNil(PartialContent.rest(of: later, wanted: wanted(120, 150)), "all of it held")
        XCTAssertNil(PartialContent.rest(of: later, wanted: wanted(300, 350)), "none of it held")
        XCTAssertTrue(PartialContent.completes(start, wanted: wanted(50, 199), etag: "\"e\"", contentRange: "bytes 100-199/1000",
                                               restETag: "\"e\""))
        XCTAssertFalse(PartialContent.completes(start, wanted: wanted(50, 199), etag: "\"e\"", contentRange: "bytes 100-999/1000",
                                                restETag: "\"e\""), "more than was asked")

        XCTAssertEqual(PartialContent.wanted(range: "bytes=50-199", ifRange: nil, piece: start, etag: "\"e\"", lastModified: nil),
                       wanted(50, 199))
        XCTAssertEqual(PartialContent.wanted(range: "bytes=50-", ifRange: "\"e\"", piece: start, etag: "\"e\"", lastModified: nil),
                       wanted(50, 999))
        XCTAssertNil(PartialContent.wanted(range: "bytes=50-199", ifRange: "\"old\"", piece: start, etag: "\"e\"", lastModified: nil),
                     "an If-Range that does not hold wants the whole, not this piece")
        XCTAssertNil(PartialContent.wanted(range: "bytes=0-9,50-59", ifRange: nil, piece: start, etag: "\"e\"", lastModified: nil))
    }

    /// The rest completes a piece only from the same representation: a
    /// strong ETag equal to the piece's (an upstream that ignores If-Range
    /// may send a newer version's rest).
    func testTheRestCompletesAPieceOnlyWithTheSameStrongValidator() {
        let piece = PartialContent.Piece(first: 0, last: 39, length: 100)
        XCTAssertTrue(PartialContent.completes(piece, etag: "\"v1\"", contentRange: "bytes 40-99/100", restETag: "\"v1\""))
        XCTAssertFalse(PartialContent.completes(piece, etag: "\"v1\"", contentRange: "bytes 40-99/100", restETag: "\"v2\""))
        XCTAssertFalse(PartialContent.completes(piece, etag: "\"v1\"", contentRange: "bytes 40-99/100", restETag: nil))
        XCTAssertFalse(PartialContent.completes(piece, etag: "W/\"v1\"", contentRange: "bytes 40-99/100", restETag: "W/\"v1\""))
        XCTAssertFalse(PartialContent.completes(piece, etag: "\"v1\"", contentRange: "bytes 41-99/100", restETag: "\"v1\""))
        XCTAssertFalse(PartialContent.completes(piece, etag: "\"v1\"", contentRange: nil, restETag: "\"v1\""))
    }
}
