import XCTest
@testable import CacheSemantics

/// No-Vary-Search (draft-ietf-httpbis-no-vary-search-04): the field parsed
/// as section 4 says, queries compared as section 5 says.
final class SearchVarianceTests: XCTestCase {
    private func same(_ field: String, _ a: String, _ b: String, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        let variance = SearchVariance(field: field)
        let forward = variance.equivalent(a[...], b[...]), backward = variance.equivalent(b[...], a[...])
        XCTAssertEqual(forward, backward, "symmetric", file: file, line: line)
        return forward
    }

    func testTheSpecsExamples() {
        // key-order: the order of different names does not count; of one name's values it does.
        XCTAssertTrue(same("key-order", "a=1&b=2", "b=2&a=1"))
        XCTAssertFalse(same("key-order", "a=1&a=2", "a=2&a=1"))
        XCTAssertFalse(same("key-order", "a=1&b=2", "a=1"))
        // params: no parameter counts.
        XCTAssertTrue(same("params", "a=1", ""))
        XCTAssertTrue(same("params", "a=1&b=2", "c=3"))
        // params with a list: those do not count, the others do.
        XCTAssertTrue(same(#"params=("utm_source" "utm_medium")"#, "q=x&utm_source=mail&utm_medium=1", "q=x"))
        XCTAssertFalse(same(#"params=("utm_source")"#, "q=x", "q=y"))
        XCTAssertFalse(same(#"params=("utm_source")"#, "q=x&utm_source=a&b=1", "utm_source=b&b=1&q=x"), "order still counts")
        // except: only those count.
        XCTAssertTrue(same(#"params, except=("q")"#, "q=x&foo=1", "bar=2&q=x"))
        XCTAssertFalse(same(#"params, except=("q")"#, "q=x", "q=y"))
        XCTAssertTrue(same(#"key-order, params, except=("a" "b")"#, "b=2&c=9&a=1", "a=1&b=2"))
        XCTAssertFalse(same(#"params, except=("a" "b")"#, "b=2&a=1", "a=1&b=2"), "without key-order the order counts")
    }

    func testQueriesAreReadAsFormsAre() {
        XCTAssertTrue(same("key-order", "a=%41", "a=A"))
        XCTAssertTrue(same("key-order", "a+b=1", "a%20b=1"))
        XCTAssertTrue(same("key-order", "a", "a="))
        XCTAssertTrue(same("key-order", "a=1&&b=2&", "a=1&b=2"))
        XCTAssertFalse(same("key-order", "a=%4", "a=%40"), "a broken escape is its bytes")
        XCTAssertTrue(same("key-order", "a=1=2", "a=1%3D2"), "split at the first =")
        // Names in the field are decoded as a query's are.
        XCTAssertTrue(same(#"params=("a b")"#, "a+b=1&c=2", "c=2"))
        XCTAssertTrue(same(#"params=("a%20b")"#, "a%20b=1&c=2", "c=2"))
        XCTAssertTrue(same(#"params=("q\"x")"#, "q%22x=1", ""))
    }

    func testWhatTheFieldSaysIsParsedStrictly() {
        let standard = SearchVariance.standard
        XCTAssertEqual(SearchVariance(field: "key-order"), SearchVariance(params: .all, varyOnKeyOrder: false))
        XCTAssertEqual(SearchVariance(field: "key-order=?0"), standard)
        XCTAssertEqual(SearchVariance(field: "params"), SearchVariance(params: .only([]), varyOnKeyOrder: true))
        XCTAssertEqual(SearchVariance(field: "params=?0"), standard)
        XCTAssertEqual(SearchVariance(field: #"params=("a" "b")"#), SearchVariance(params: .allBut([[0x61], [0x62]]), varyOnKeyOrder: true))
        XCTAssertEqual(SearchVariance(field: #"params, except=("a")"#), SearchVariance(params: .only([[0x61]]), varyOnKeyOrder: true))
        XCTAssertEqual(SearchVariance(field: "params;x=1"), SearchVariance(params: .only([]), varyOnKeyOrder: true), "parameters ignored")
        // Each kind of invalid value: the default, as without the field.
        for invalid in [
            "", "   ", "(", "key-order=\"yes\"", "key-order=1", "params=1", "params=token", #"params=("a" 1)"#,
            #"except=("a")"#, #"params=?0, except=("a")"#, #"params=("a"), except=("b")"#, #"params, except="a""#,
            #"params, except=(a)"#, "unknown", "key-order, other=?1", "Key-Order", "key-order,", "params=(\"a\"",
            "params=\"\u{7f}\"",
        ] {
            XCTAssertEqual(SearchVariance(field: invalid), standard, invalid)
        }
        XCTAssertEqual(SearchVariance(field: nil), standard)
        XCTAssertTrue(standard.isStandard)
        XCTAssertFalse(standard.equivalent("a=1&b=2", "b=2&a=1"))
    }

    /// Every prefix of valid fields (byte by byte), and random bytes: never
    /// a crash, always a variance; a prefix that is a complete field parses as one.
    func testEveryPrefixAndRandomBytes() {
        for field in [#"key-order, params, except=("a" "b\"c")"#, #"params=("utm_source" "utm_medium");x=1"#] {
            let bytes = Array(field.utf8)
            for end in 0...bytes.count {
                _ = SearchVariance(field: String(decoding: bytes[..<end], as: UTF8.self))
            }
        }
        XCTAssertEqual(SearchVariance(field: "key-order, params"), SearchVariance(params: .only([]), varyOnKeyOrder: false))
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("key-orderparamsexcept=(),; \"\\?01%&+aAb".utf8) + [0x00, 0xFF, 0x09]
        for _ in 0..<3000 {
            let field = (0..<Int.random(in: 0...24, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            let variance = SearchVariance(field: String(decoding: field, as: UTF8.self))
            let query = String(decoding: (0..<Int.random(in: 0...24, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! },
                               as: UTF8.self)
            // The canonical form is a fixed point: it reads back as itself.
            let canonical = variance.canonicalQuery(query[...])
            XCTAssertEqual(variance.canonicalQuery(canonical[...]), canonical, "\(field) \(query)")
            XCTAssertTrue(variance.equivalent(query[...], canonical[...]))
        }
    }
}
