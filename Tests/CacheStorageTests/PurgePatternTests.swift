import XCTest
@testable import CacheStorage

/// Purges by regular expression: POSIX extended expressions, refused with
/// the reason when they cannot be used, bounded in time (no back-references).
final class PurgePatternTests: XCTestCase {
    private func refusal(_ source: String) -> String? {
        if case .failure(let error) = PurgePattern.compile(source) { return error.message }
        return nil
    }

    func testAPatternMatchesAKeysPathAndQuery() throws {
        let pattern = try PurgePattern.compile("^/a/[0-9]+(\\?|$)").get()
        XCTAssertTrue(pattern.matches(key: "/a/12"))
        XCTAssertTrue(pattern.matches(key: "/a/12?x=1 example.com"))
        XCTAssertFalse(pattern.matches(key: "/a/b"))
        XCTAssertFalse(pattern.matches(key: "/b/a/1"))
    }

    func testEachKindOfUnusablePatternIsRefusedWithItsReason() {
        XCTAssertEqual(refusal(""), "the regular expression is empty")
        XCTAssertEqual(refusal(String(repeating: "a", count: PurgePattern.maxLength + 1)),
                       "the regular expression is longer than \(PurgePattern.maxLength) bytes")
        XCTAssertEqual(refusal("a\u{0}b"), "the regular expression holds a NUL byte")
        XCTAssertNotNil(refusal("(a"), "does not compile: the engine's reason")
        for backReference in ["(a)\\1", "^/((x+)+)\\2$", "(x)(y)\\2"] {
            XCTAssertEqual(refusal(backReference)?.hasPrefix("back-references"), true, backReference)
        }
        // A backslash and a digit inside a bracket expression are two members, not a back-reference.
        for fine in ["[\\1]", "[]\\1]", "[^]\\1]", "[[:digit:]\\2]x", "\\.1", "a\\\\1"] {
            XCTAssertNil(refusal(fine), fine)
        }
    }
}
