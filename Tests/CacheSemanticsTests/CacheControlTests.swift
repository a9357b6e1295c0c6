import XCTest
@testable import CacheSemantics

final class CacheControlTests: XCTestCase {
    func testEveryDirectiveIsRecognisedInAnyCaseAndNearMissesAreNot() {
        let cc = CacheControl("PUBLIC, MAX-AGE=1, S-MAXAGE=2, NO-STORE, MUST-REVALIDATE, PROXY-REVALIDATE, NO-TRANSFORM, "
            + "IMMUTABLE, ONLY-IF-CACHED, MAX-STALE=3, MIN-FRESH=4, STALE-WHILE-REVALIDATE=5, STALE-IF-ERROR=6, "
            + "MUST-UNDERSTAND, NO-CACHE, PRIVATE")
        XCTAssertTrue(cc.isPublic && cc.noStore && cc.mustRevalidate && cc.proxyRevalidate && cc.noTransform && cc.immutable
                      && cc.onlyIfCached && cc.mustUnderstand && cc.noCache && cc.isPrivate)
        let values: [Int?] = [cc.maxAge, cc.sMaxAge, cc.maxStale, cc.minFresh, cc.staleWhileRevalidate, cc.staleIfError]
        XCTAssertEqual(values, [1, 2, 3, 4, 5, 6])
        XCTAssertEqual(CacheControl("max_age=1, maxage=2, max-age2=3, public1, no-stor, nostore, no-store\u{7F}, m\u{C3}\u{A1}x-age=4"),
                       CacheControl())
        XCTAssertEqual(CacheControl(#"max-age="7\"x""#).maxAge, 0)  // an escape inside the quotes: not digits
        XCTAssertEqual(CacheControl(#"no-cache="a\"#).noCacheFields, [#"a\"#])  // an unterminated quote ends the value
    }

    func testFieldNameListsAreValuesCopiedApart() {
        let original = CacheControl(#"no-cache="a", private="b, c""#)
        var copy = original
        copy.noCacheFields.append("d")
        XCTAssertEqual(original.noCacheFields, ["a"])
        XCTAssertEqual(copy.noCacheFields, ["a", "d"])
        XCTAssertEqual(copy.privateFields, ["b", "c"], "setting one list keeps the other")
        XCTAssertNotEqual(copy, original)
        copy.noCacheFields = ["a"]
        XCTAssertEqual(copy, original, "equal lists make equal values")
        copy.noCacheFields = []
        copy.privateFields = []
        XCTAssertEqual(copy, CacheControl(), "no lists is the same as empty ones")
    }

    func testDirectives() {
        let cc = CacheControl("public, Max-Age=60, s-maxage=\"120\", no-cache=\"Set-Cookie, X\", stale-while-revalidate=30")
        XCTAssertTrue(cc.isPublic)
        XCTAssertEqual(cc.maxAge, 60)
        XCTAssertEqual(cc.sMaxAge, 120)
        // Section 5.2.2.4: qualified no-cache names fields; it does not force validation.
        XCTAssertFalse(cc.noCache)
        XCTAssertEqual(cc.noCacheFields, ["set-cookie", "x"])
        XCTAssertTrue(CacheControl("no-cache").noCache)
        XCTAssertEqual(cc.staleWhileRevalidate, 30)
        XCTAssertFalse(cc.noStore)
    }

    func testInvalidAndHugeValues() {
        XCTAssertEqual(CacheControl("max-age=abc").maxAge, 0)
        XCTAssertEqual(CacheControl("max-age=-5").maxAge, 0)
        XCTAssertEqual(CacheControl("max-age=99999999999999").maxAge, 2_147_483_648)
        XCTAssertEqual(CacheControl("max-age=10, max-age=20").maxAge, 10)
        XCTAssertNil(CacheControl("").maxAge)
        XCTAssertEqual(CacheControl("max-stale").maxStale, Int.max)
        XCTAssertTrue(CacheControl("private, no-store").noStore)
        XCTAssertTrue(CacheControl("PRIVATE").isPrivate)
        // No whitespace is allowed around "=" (RFC 9111 section 5.2): malformed reads as stale.
        XCTAssertEqual(CacheControl("max-age = 3600").maxAge, 0)
        XCTAssertEqual(CacheControl("max-age=\"3600\"").maxAge, 3600)
    }
}

final class HTTPDateTests: XCTestCase {
    func testThreeFormats() {
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT"), 784111777)
        XCTAssertEqual(HTTPDate.parse("Sun Nov  6 08:49:37 1994"), 784111777)
        XCTAssertNil(HTTPDate.parse("0"))
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 1994 25:49:37 GMT"))
        XCTAssertNil(HTTPDate.parse("yesterday"))
    }

    /// One space between the parts, as the grammar has it; an Expires with
    /// a doubled space is invalid, so already expired.
    func testMonthDayAndZoneNamesInAnotherCaseAreTheSameDate() {
        // RFC 9110 section 5.6.7: recipients are robust (an Expires read as
        // invalid would mean "already expired").
        for text in ["Sun, 06 nov 1994 08:49:37 GMT", "Sun, 06 NOV 1994 08:49:37 GMT", "sun, 06 Nov 1994 08:49:37 GMT",
                     "SUN, 06 Nov 1994 08:49:37 gmt", "Sun, 06 Nov 1994 08:49:37 Gmt", "sunday, 06-nov-94 08:49:37 gmt",
                     "sun nov  6 08:49:37 1994"] {
            XCTAssertEqual(HTTPDate.parse(text), 784111777, text)
        }
        XCTAssertNil(HTTPDate.parse("Sun, 06 Novem 1994 08:49:37 GMT"))
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 UTC"), "GMT only, in any case")
    }

    func testDoubledSpacesMakeADateInvalid() {
        XCTAssertNil(HTTPDate.parse("Sun,  06 Nov 1994 08:49:37 GMT"))
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov  1994 08:49:37 GMT"))
        XCTAssertNil(HTTPDate.parse("Sunday,  06-Nov-94 08:49:37 GMT"))
        XCTAssertNil(HTTPDate.parse("Sun Nov 6 08:49:37 1994"), "asctime pads a one-digit day with a space")
        XCTAssertNil(HTTPDate.parse("Sun Nov   6 08:49:37 1994"))
        XCTAssertEqual(HTTPDate.parse("Sun Nov 16 08:49:37 1994"), 784111777 + 10 * 86_400)
        XCTAssertEqual(Freshness.lifetime(CacheControl(""), dateValue: 100, expires: "Thu,  01 Dec 2094 16:00:00 GMT",
                                          responseTime: 100, shared: true), 0, "an invalid Expires: already expired")
    }

    /// The 29-byte fast path and the general reading agree: same-length
    /// variants the fast path leaves alone are still read (or refused) the
    /// general way.
    func testFixdateFastPathAgreesWithTheGeneralReading() {
        XCTAssertEqual(HTTPDate.parse("Xyz, 06 Nov 1994 08:49:37 GMT"), 784111777)  // weekday not checked, as before
        XCTAssertEqual(HTTPDate.parse("Sun, +6 Nov 1994 08:49:37 GMT"), 784111777)  // digits only in the fast path
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nox 1994 08:49:37 GMT"))
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 1994 08:60:37 GMT"))
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 UTC"))
        XCTAssertEqual(HTTPDate.parse("Sat, 29 Feb 2020 23:59:60 GMT"), 1_583_020_800)  // leap second accepted as before
    }

    func testFormatRoundTrips() {
        XCTAssertEqual(HTTPDate.formatString(784111777), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(HTTPDate.formatString(0), "Thu, 01 Jan 1970 00:00:00 GMT")
        for t: Int64 in [951782400, 1_700_000_000, 4_102_444_800, 1_709_164_800] {
            XCTAssertEqual(HTTPDate.parse(HTTPDate.formatString(t)), t)
        }
    }
}

final class FreshnessTests: XCTestCase {
    func testLifetimePrecedence() {
        let both = CacheControl("max-age=10, s-maxage=20")
        XCTAssertEqual(Freshness.lifetime(both, dateValue: 0, expires: nil, responseTime: 0, shared: true), 20)
        XCTAssertEqual(Freshness.lifetime(both, dateValue: 0, expires: nil, responseTime: 0, shared: false), 10)
        let date: Int64 = 784111777
        XCTAssertEqual(Freshness.lifetime(CacheControl(), dateValue: date, expires: "Sun, 06 Nov 1994 08:50:37 GMT",
                                          responseTime: date + 5, shared: true), 60)
        XCTAssertEqual(Freshness.lifetime(CacheControl(), dateValue: date, expires: "0", responseTime: date, shared: true), 0)
        XCTAssertEqual(Freshness.lifetime(CacheControl("max-age=5"), dateValue: date, expires: "0", responseTime: date, shared: true), 5)
        XCTAssertNil(Freshness.lifetime(CacheControl("public"), dateValue: date, expires: nil, responseTime: date, shared: true))
    }

    /// Times from a record or a header are not trusted: extreme values
    /// saturate instead of trapping (one record in Redis crashed a node).
    func testAgeAndFreshnessOfExtremeTimesSaturate() {
        let extremes: [Int64] = [Int64.min, Int64.min + 1, -1, 0, 1_700_000_000, Int64.max - 1, Int64.max]
        for a in extremes {
            for b in extremes {
                let t = ResponseTiming(requestTime: a, responseTime: b, dateValue: a, ageValue: Int.max)
                let initial = Freshness.correctedInitialAge(t)
                XCTAssertGreaterThanOrEqual(initial, 0)
                XCTAssertGreaterThanOrEqual(Freshness.currentAge(correctedInitialAge: initial, responseTime: b, now: a), 0)
                _ = Freshness.lifetime(CacheControl(), dateValue: a, expires: "Sun, 06 Nov 1994 08:50:37 GMT", responseTime: b, shared: true)
                _ = Freshness.heuristicLifetime(status: 200, CacheControl(), lastModified: "Sun, 06 Nov 1994 08:50:37 GMT",
                                                dateValue: a, responseTime: b)
            }
        }
        XCTAssertEqual(Int64.min.minusSaturating(1), Int64.min)
        XCTAssertEqual(Int64.max.minusSaturating(-1), Int64.max)
        XCTAssertEqual(Int64.max.plusSaturating(1), Int64.max)
        XCTAssertEqual(Int64.min.plusSaturating(-1), Int64.min)
        XCTAssertEqual(Int64(5).minusSaturating(7), -2)
    }

    func testAgeCalculation() {
        // Date 10s before receipt, Age 3 from upstream, 2s round trip.
        let t = ResponseTiming(requestTime: 98, responseTime: 100, dateValue: 90, ageValue: 3)
        XCTAssertEqual(Freshness.correctedInitialAge(t), 10)  // max(apparent 10, 3 + 2)
        let u = ResponseTiming(requestTime: 98, responseTime: 100, dateValue: 100, ageValue: 30)
        XCTAssertEqual(Freshness.correctedInitialAge(u), 32)
        XCTAssertEqual(Freshness.currentAge(correctedInitialAge: 32, responseTime: 100, now: 150), 82)
        // A Date in the future does not make the age negative.
        let v = ResponseTiming(requestTime: 100, responseTime: 100, dateValue: 200, ageValue: 0)
        XCTAssertEqual(Freshness.correctedInitialAge(v), 0)
        XCTAssertEqual(Freshness.parseAge("12"), 12)
        XCTAssertNil(Freshness.parseAge("-1"))
        XCTAssertNil(Freshness.parseAge("1.5"))
        XCTAssertEqual(Freshness.parseAge("7200, 0"), 7200, "a list counts by its first member (RFC 9111 section 5.1)")
        XCTAssertEqual(Freshness.parseAge(" 30 ,5"), 30)
        XCTAssertNil(Freshness.parseAge("soon, 5"), "an invalid first member: ignored")
        XCTAssertNil(Freshness.parseAge(""))
    }

    func testStorability() {
        func decide(_ method: String = "GET", _ status: Int = 200, req: String = "", res: String = "max-age=60",
                    auth: Bool = false, shared: Bool = true) -> StoreDecision {
            let response = CacheControl(res)
            return Storability.decide(method: method, status: status, request: CacheControl(req), response: response,
                                      hasAuthorization: auth, shared: shared,
                                      reusable: response.maxAge != nil || response.sMaxAge != nil)
        }
        XCTAssertEqual(decide(), .store)
        XCTAssertNotEqual(decide("POST"), .store)
        XCTAssertNotEqual(decide(res: "max-age=60, no-store"), .store)
        XCTAssertNotEqual(decide(req: "no-store"), .store)
        XCTAssertNotEqual(decide(res: "max-age=60, private"), .store)
        XCTAssertEqual(decide(res: "max-age=60, private", shared: false), .store)
        XCTAssertNotEqual(decide(auth: true), .store)
        XCTAssertEqual(decide(res: "s-maxage=60", auth: true), .store)
        XCTAssertEqual(decide(res: "max-age=60, public", auth: true), .store)
        XCTAssertNotEqual(decide(res: "public"), .store)
        XCTAssertNotEqual(decide("GET", 206), .store)
        XCTAssertNotEqual(decide("GET", 304), .store)
        XCTAssertNotEqual(decide("GET", 101), .store)
        XCTAssertEqual(decide("GET", 404), .store)
        XCTAssertNotEqual(decide("GET", 412), .store, "answers the request's preconditions")
        XCTAssertNotEqual(decide("GET", 416), .store, "answers the request's Range")
        XCTAssertNotEqual(decide("GET", 416, res: "max-age=60, must-understand"), .store)
        // Section 3: an unknown final status with explicit freshness may be stored.
        XCTAssertEqual(decide("GET", 299), .store)
        XCTAssertEqual(decide("GET", 599), .store)
        // Section 5.2.2.3: must-understand overrides no-store for understood codes only.
        XCTAssertEqual(decide(res: "max-age=60, no-store, must-understand"), .store)
        XCTAssertNotEqual(decide("GET", 299, res: "max-age=60, no-store, must-understand"), .store)
        // Section 5.2.2.7: private with field names does not forbid storing.
        XCTAssertEqual(decide(res: "max-age=60, private=\"set-cookie\""), .store)
    }

    /// RFC 9111 section 4.2.2: heuristic freshness.
    func testHeuristicFreshness() {
        let date: Int64 = 1_700_000_000
        let lastModified = HTTPDate.formatString(date - 10_000)
        XCTAssertEqual(Freshness.heuristicLifetime(status: 200, CacheControl(), lastModified: lastModified,
                                                   dateValue: date, responseTime: date), 1000)
        XCTAssertEqual(Freshness.heuristicLifetime(status: 200, CacheControl(), lastModified: HTTPDate.formatString(date - 100 * 86_400),
                                                   dateValue: date, responseTime: date), Freshness.maxHeuristicLifetime)
        XCTAssertNil(Freshness.heuristicLifetime(status: 302, CacheControl(), lastModified: lastModified,
                                                 dateValue: date, responseTime: date))
        XCTAssertEqual(Freshness.heuristicLifetime(status: 302, CacheControl("public"), lastModified: lastModified,
                                                   dateValue: date, responseTime: date), 1000)
        XCTAssertNil(Freshness.heuristicLifetime(status: 200, CacheControl(), lastModified: nil, dateValue: date, responseTime: date))
        XCTAssertEqual(CacheControl("private=\"Set-Cookie, X-User\"").privateFields, ["set-cookie", "x-user"])
        XCTAssertFalse(CacheControl("private=\"Set-Cookie\"").isPrivate)
    }

    func testReuse() {
        let none = CacheControl()
        XCTAssertEqual(Reuse.decide(lifetime: 60, currentAge: 10, request: none, response: none, requestPragmaNoCache: false), .fresh(ttl: 50))
        XCTAssertEqual(Reuse.decide(lifetime: 60, currentAge: 70, request: none, response: none, requestPragmaNoCache: false), .stale(ttl: -10))
        XCTAssertEqual(Reuse.decide(lifetime: 60, currentAge: 10, request: CacheControl("max-age=5"), response: none, requestPragmaNoCache: false), .stale(ttl: 50))
        XCTAssertEqual(Reuse.decide(lifetime: 60, currentAge: 10, request: CacheControl("min-fresh=55"), response: none, requestPragmaNoCache: false), .stale(ttl: 50))
        XCTAssertEqual(Reuse.decide(lifetime: 60, currentAge: 70, request: CacheControl("max-stale=20"), response: none, requestPragmaNoCache: false), .fresh(ttl: -10))
        XCTAssertEqual(Reuse.decide(lifetime: 60, currentAge: 70, request: CacheControl("max-stale=20"), response: CacheControl("must-revalidate"), requestPragmaNoCache: false), .stale(ttl: -10))
        XCTAssertEqual(Reuse.decide(lifetime: 60, currentAge: 10, request: CacheControl("no-cache"), response: none, requestPragmaNoCache: false), .stale(ttl: 50))
        XCTAssertEqual(Reuse.decide(lifetime: 60, currentAge: 10, request: none, response: none, requestPragmaNoCache: true), .stale(ttl: 50))
        XCTAssertEqual(Reuse.decide(lifetime: 60, currentAge: 10, request: none, response: CacheControl("no-cache"), requestPragmaNoCache: false), .stale(ttl: 50))
    }

    func testVary() {
        XCTAssertEqual(Vary.fieldNames("Accept-Encoding, accept-language,Accept-Encoding"), ["accept-encoding", "accept-language"])
        XCTAssertNil(Vary.fieldNames("Accept, *"))
        XCTAssertEqual(Vary.fieldNames(nil), [])
        XCTAssertEqual(Vary.normalize("gzip,  br"), Vary.normalize("gzip, br"))
        // RFC 9111 section 4.1: normalizing to identical semantics.
        XCTAssertEqual(Vary.normalize("GZIP, br", field: "accept-encoding"), Vary.normalize("br,gzip", field: "accept-encoding"))
        XCTAssertEqual(Vary.normalize("EN-us; q=0.5", field: "accept-language"), Vary.normalize("en-US;q=0.5", field: "accept-language"))
        XCTAssertEqual(Vary.normalize("en, fr", field: "accept-language"), Vary.normalize("fr, en", field: "accept-language"))
        XCTAssertNotEqual(Vary.normalize("en;q=0.5, fr", field: "accept-language"), Vary.normalize("en, fr;q=0.5", field: "accept-language"))
        XCTAssertNotEqual(Vary.normalize("A", field: "x-custom"), Vary.normalize("a", field: "x-custom"))
    }
}
