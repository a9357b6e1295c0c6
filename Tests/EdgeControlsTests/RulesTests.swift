import EdgeControls
import HTTPHeaders
import XCTest

final class RulesTests: XCTestCase {
    let values = RequestValues(host: "api.example", clientAddress: "127.0.0.2", requestID: "abc123")

    func testValuesTakeTheirVariables() throws {
        XCTAssertEqual(try FieldValue.parse("max-age=63072000").get().render(values), "max-age=63072000")
        XCTAssertEqual(try FieldValue.parse("$client_addr via $host ($request_id) costs $$5").get().render(values),
                       "127.0.0.2 via api.example (abc123) costs $5")
        XCTAssertEqual(try FieldValue.parse("").get().render(values), "")
        XCTAssertEqual(FieldValue.parse("$hostname").failure, .unknownVariable("hostname"))
        XCTAssertEqual(FieldValue.parse("a\r\nX-Evil: 1").failure, .control)
        XCTAssertEqual(FieldValue.parse("a\u{0}").failure, .control)
        XCTAssertTrue(try FieldValue.parse("id=$request_id").get().usesRequestID)
    }

    func testRemoveThenSetThenAdd() throws {
        let rules = HeaderRules(set: [.init(name: "X-Env", value: try FieldValue.parse("prod").get())],
                                add: [.init(name: "Via", value: try FieldValue.parse("larder").get())], remove: ["X-Debug"])
        var fields: HeaderFields = ["x-env": "dev", "x-debug": "1", "accept": "*/*", "via": "1.1 a", "X-ENV": "again"]
        rules.apply(to: &fields, values)
        XCTAssertEqual(fields.fields.map(\.name), ["accept", "via", "x-env", "via"])
        XCTAssertEqual(fields["x-env"], "prod")
        XCTAssertEqual(fields.values("via"), ["1.1 a", "larder"])
        XCTAssertTrue(rules.drops("x-env") && rules.drops("x-debug") && !rules.drops("via"))
    }

    func testARouteRulesApplyOverTheGlobalOnes() throws {
        let global = HeaderRules(set: [.init(name: "Strict-Transport-Security", value: try FieldValue.parse("max-age=1").get()),
                                       .init(name: "X-Frame-Options", value: try FieldValue.parse("DENY").get())],
                                 remove: ["Server"])
        let route = HeaderRules(set: [.init(name: "X-Frame-Options", value: try FieldValue.parse("SAMEORIGIN").get())], remove: ["X-Powered-By"])
        let both = route.applied(over: global)
        XCTAssertEqual(both.fields(values).map { "\($0.name): \($0.value)" },
                       ["strict-transport-security: max-age=1", "x-frame-options: SAMEORIGIN"])
        XCTAssertEqual(Set(both.removes), ["server", "x-powered-by"])
    }

    func testFieldNames() {
        XCTAssertTrue(HeaderRules.isFieldName("X-Api-Key"))
        XCTAssertFalse(HeaderRules.isFieldName("X Api"))
        XCTAssertFalse(HeaderRules.isFieldName("X:Api"))
        XCTAssertFalse(HeaderRules.isFieldName(""))
    }

    func testCookies() {
        XCTAssertEqual(Cookies.value(of: "lang", in: "session=abc; lang=de; theme=dark"), "de")
        XCTAssertEqual(Cookies.value(of: "lang", in: "lang=fr;lang=de"), "fr")
        XCTAssertNil(Cookies.value(of: "lang", in: "session=abc; language=de"))
        XCTAssertEqual(Cookies.value(of: "lang", in: "lang="), "")
        XCTAssertEqual(Cookies.keyedCookie(Cookies.variantField("lang")), "lang")
        XCTAssertNil(Cookies.keyedCookie("cookie"))
    }

    func testRequestIDsDiffer() {
        let ids = (0..<1000).map { _ in RequestID.next() }
        XCTAssertEqual(Set(ids).count, 1000)
        XCTAssertTrue(ids.allSatisfy { $0.utf8.count == 32 && $0.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) } })
    }

    func testEdgeSettingsOfARouteOverTheGlobalOnes() throws {
        var global = EdgeSettings()
        global.deny = try AddressList.parse(["127.0.0.2"]).get()
        global.rateLimit = RateLimit(requests: 10, periodMilliseconds: 1000, burst: 0)
        let base = global.rules(over: nil)!
        var route = EdgeSettings()
        route.stripCookies = true
        let mine = route.rules(over: base)!
        XCTAssertTrue(mine.rateLimit === base.rateLimit, "a client counts once in the global limit wherever it goes")
        XCTAssertFalse(mine.access.admits(IPAddress("127.0.0.2")!))
        XCTAssertTrue(mine.stripCookies && !base.stripCookies)
        route.allow = try AddressList.parse(["127.0.0.2"]).get()
        XCTAssertTrue(route.rules(over: base)!.access.admits(IPAddress("127.0.0.2")!), "a route's lists replace the global ones")
        XCTAssertNil(EdgeSettings().rules(over: nil))
    }
}

extension Result {
    var failure: Failure? { if case .failure(let f) = self { return f } else { return nil } }
}
