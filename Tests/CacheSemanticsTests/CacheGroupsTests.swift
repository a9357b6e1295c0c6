import XCTest
@testable import CacheSemantics

/// Cache-Groups and Cache-Group-Invalidation values (RFC 9875): Lists of
/// Strings, parsed as RFC 8941 says.
final class CacheGroupsTests: XCTestCase {
    func testTheRFCsExamplesAndItsRules() {
        XCTAssertEqual(CacheGroups.parse(#""scripts""#), ["scripts"])
        XCTAssertEqual(CacheGroups.parse(#""scripts", "styles""#), ["scripts", "styles"])
        XCTAssertEqual(CacheGroups.parse(#""a";level=1,"b""#), ["a", "b"], "parameters ignored")
        XCTAssertEqual(CacheGroups.parse(#"token, "b", 12, ?1, ("x" "y"), :aGVsbG8=:"#), ["b"], "members that are not strings skipped")
        XCTAssertEqual(CacheGroups.parse(#""a", "a", """#), ["a"], "repeats and empty strings once or not at all")
        XCTAssertEqual(CacheGroups.parse(#""with \"quote\" and \\""#), [#"with "quote" and \"#])
        XCTAssertEqual(CacheGroups.parse("  \"padded\"  ,\t\"tab\""), ["padded", "tab"])
        XCTAssertEqual(CacheGroups.parse(""), [])
        XCTAssertEqual(CacheGroups.parse(nil), [])
    }

    /// Each kind of invalid value: the field ignored as a whole.
    func testAValueThatDoesNotParseNamesNoGroup() {
        for invalid in [#""a" "b""#, #""unterminated"#, #""a","#, #","a""#, #""a";"#, #""bad\x""#, "\"ctl\u{1}\"",
                        #""a", ("b""#, "\"é\"", #""a";=1"#] {
            XCTAssertEqual(CacheGroups.parse(invalid), [], invalid)
        }
    }

    /// Every prefix of a valid value (byte by byte) and random bytes: never
    /// a crash; whatever is found is one of the strings written.
    func testEveryPrefixAndRandomBytes() {
        let value = #""scripts";v=2, "styles", token, "x\"y""#
        let bytes = Array(value.utf8)
        for end in 0...bytes.count {
            let groups = CacheGroups.parse(String(decoding: bytes[..<end], as: UTF8.self))
            XCTAssertTrue(groups.allSatisfy { ["scripts", "styles", #"x"y"#].contains($0) }, "\(groups)")
        }
        XCTAssertEqual(CacheGroups.parse(value), ["scripts", "styles", #"x"y"#])
        let alphabet = Array(#"ab"\;=, ()?1:"#.utf8) + [0x00, 0x09, 0xC3, 0xA9]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            let random = (0..<Int.random(in: 0...20, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            let groups = CacheGroups.parse(String(decoding: random, as: UTF8.self))
            XCTAssertTrue(groups.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E } })
        }
    }
}
