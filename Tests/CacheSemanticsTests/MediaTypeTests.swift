import XCTest
@testable import CacheSemantics

/// Content-Type values as a QUERY's key reads them.
final class MediaTypeTests: XCTestCase {
    func testTypeNamesAndCharsetAreCaseInsensitiveAndSpacingDoesNotCount() {
        XCTAssertEqual(MediaType.normalized("Application/JSON ; Charset=UTF-8"), "application/json;charset=utf-8")
        XCTAssertEqual(MediaType.normalized(" text/plain "), "text/plain")
        XCTAssertEqual(MediaType.normalized("text/plain; Format=\"Flowed\""), "text/plain;format=\"Flowed\"", "other values as sent")
        XCTAssertEqual(MediaType.normalized(""), "")
        XCTAssertEqual(MediaType.normalized(";;"), "")
        XCTAssertEqual(MediaType.normalized("a/b;;x"), "a/b;x")
    }

    func testJSONTypes() {
        for json in ["application/json", "application/json;charset=utf-8", "application/problem+json", "application/vnd.api+json"] {
            XCTAssertTrue(MediaType.isJSON(MediaType.normalized(json)), json)
        }
        for other in ["text/plain", "application/jsonx", "+json", "application/x-www-form-urlencoded", ""] {
            XCTAssertFalse(MediaType.isJSON(MediaType.normalized(other)), other)
        }
    }
}
