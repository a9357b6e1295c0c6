import XCTest
@testable import CacheSemantics

/// The media types `compress` names, and which Content-Types they match.
final class MediaTypePatternsTests: XCTestCase {
    private func patterns(_ list: [String]) throws -> MediaTypePatterns {
        try MediaTypePatterns.parse(list).get()
    }

    func testMediaTypePatternsParseTypesAndWildcardSubtypes() throws {
        XCTAssertTrue(try patterns([]).isEmpty)
        XCTAssertEqual(try patterns(["Application/JSON", "text/*"]).patterns, ["application/json", "text/"])
        for bad in ["json", "*/*", "*/json", "text/", "/json", "text/html; charset=utf-8", "a b/c", "text/*/x", ""] {
            XCTAssertEqual(MediaTypePatterns.parse(["text/plain", bad]), .failure(.init(entry: bad)), bad)
        }
    }

    func testMatchingIgnoresParametersCaseAndSpaces() throws {
        let p = try patterns(["application/json", "text/*"])
        for yes in ["application/json", "Application/Json; charset=utf-8", " application/json ;x=y", "text/html", "TEXT/CSV"] {
            XCTAssertTrue(p.matches(contentType: yes), yes)
        }
        for no in [nil, "", "application/jsonx", "application/json-seq", "textual/plain", "text/", "image/png",
                   "application/problem+json"] {
            XCTAssertFalse(p.matches(contentType: no), no ?? "nil")
        }
        XCTAssertFalse(MediaTypePatterns().matches(contentType: "text/html"), "nothing listed, nothing compressed")
    }
}
