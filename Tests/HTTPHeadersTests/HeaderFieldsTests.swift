import HTTPHeaders
import XCTest

final class HeaderFieldsTests: XCTestCase {
    func testANameFromOutsideIsLowercasedAndAParsedOneIsKeptAsIs() {
        XCTAssertEqual(HeaderField(name: "Cache-Control", value: "max-age=1").name, "cache-control")
        XCTAssertEqual(HeaderField(name: "etag", value: "\"1\"").name, "etag")
        // The parsers' initializer trusts its caller: no scan, no copy.
        XCTAssertEqual(HeaderField(lowercasedName: "X-As-Given", value: "v").name, "X-As-Given")
    }

    func testLookUpFindsTheFirstValueAndCombinedJoinsEveryValueInOrder() {
        let fields: HeaderFields = ["Vary": "accept", "cache-control": "max-age=1", "vary": "accept-encoding"]
        XCTAssertEqual(fields["vary"], "accept")
        XCTAssertEqual(fields.values("vary"), ["accept", "accept-encoding"])
        XCTAssertEqual(fields.combined("vary"), "accept, accept-encoding")
        XCTAssertNil(fields["etag"])
        XCTAssertNil(fields.combined("etag"))
        XCTAssertTrue(fields.contains("cache-control"))
        XCTAssertFalse(fields.contains("cache"))
    }

    func testALiteralKeepsOrderAndRepeats() {
        let fields: HeaderFields = ["set-cookie": "a=1", "x": "y", "set-cookie": "b=2"]
        XCTAssertEqual(fields.map(\.name), ["set-cookie", "x", "set-cookie"])
        XCTAssertEqual(fields.count, 3)
    }

    func testRemoveTakesEveryFieldOfThatNameAndNoOther() {
        var fields: HeaderFields = ["a": "1", "ab": "2", "a": "3"]
        fields.remove("a")
        XCTAssertEqual(fields, ["ab": "2"])
        fields.append("c", "4")
        fields.append(HeaderField(name: "D", value: "5"))
        XCTAssertEqual(fields.map(\.name), ["ab", "c", "d"])
    }

    func testItIsACollectionThatFiltersAndReplacesInPlace() {
        var fields: HeaderFields = ["a": "1", "b": "2", "c": "3"]
        let kept = fields.filter { $0.name != "b" }
        XCTAssertEqual(kept, ["a": "1", "c": "3"])
        fields[1].value = "two"
        XCTAssertEqual(fields["b"], "two")
        fields.replaceSubrange(0..<1, with: [HeaderField(name: "z", value: "26")])
        XCTAssertEqual(fields.first?.name, "z")
        fields.removeAll(keepingCapacity: true)
        XCTAssertTrue(fields.isEmpty)
    }

    func testNamesOfEqualLengthAreComparedByContent() {
        XCTAssertTrue("etag".isField("etag"))
        XCTAssertFalse("etah".isField("etag"))
        XCTAssertFalse("etags".isField("etag"))
    }
}
