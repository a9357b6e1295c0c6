import XCTest
@testable import CacheStorage

/// The paths whose responses said No-Vary-Search: what they are looked up
/// and stored under, and the bound on how many are kept.
final class SearchVariancesTests: XCTestCase {
    func testAPathIsKeyedByItsCanonicalQueryOnceAResponseSaidSo() {
        let table = SearchVariances()
        XCTAssertNil(table.lookupKey("/a?utm=1&q=2"), "nothing recorded: keys as they are")
        XCTAssertEqual(table.storeKey("/a?utm=1&q=2", field: #"params=("utm")"#), "/a?q=2")
        XCTAssertEqual(table.lookupKey("/a?q=2&utm=9"), "/a?q=2", "the same key for any utm")
        XCTAssertEqual(table.lookupKey("/a"), "/a")
        XCTAssertNil(table.lookupKey("/b?utm=1"), "another path")
        // Virtual hosts: the host after the space is part of the path, kept at the end.
        XCTAssertEqual(table.storeKey("/v?x=1&y=2 example.com", field: "key-order"), "/v?x=1&y=2 example.com")
        XCTAssertEqual(table.lookupKey("/v?y=2&x=1 example.com"), "/v?x=1&y=2 example.com")
        XCTAssertNil(table.lookupKey("/v?y=2&x=1 other.example"))
        XCTAssertEqual(table.storeKey("/all?anything=1", field: "params"), "/all")
        XCTAssertEqual(table.recorded, 3)
    }

    func testAResponseWithoutTheFieldTakesThePathOut() {
        let table = SearchVariances()
        _ = table.storeKey("/a?utm=1", field: "params")
        XCTAssertEqual(table.storeKey("/a?utm=2", field: nil), "/a?utm=2")
        XCTAssertNil(table.lookupKey("/a?utm=3"))
        _ = table.storeKey("/a?utm=1", field: "params")
        XCTAssertEqual(table.storeKey("/a?utm=2", field: "params=1"), "/a?utm=2", "an invalid field: as without one")
        XCTAssertTrue(table.isEmpty)
    }

    func testTheTableIsBounded() {
        let table = SearchVariances(limit: 2)
        XCTAssertEqual(table.storeKey("/1?a=1", field: "params"), "/1")
        XCTAssertEqual(table.storeKey("/2?a=1", field: "params"), "/2")
        XCTAssertEqual(table.storeKey("/3?a=1", field: "params"), "/3?a=1", "full: keyed by the whole query")
        XCTAssertNil(table.lookupKey("/3?a=2"))
        XCTAssertEqual(table.storeKey("/1?b=1", field: "key-order"), "/1?b=1", "a recorded path may still change")
        XCTAssertEqual(table.recorded, 2)
    }

    func testAPurgeNamesTheCanonicalKeyToo() {
        let table = SearchVariances()
        XCTAssertEqual(table.withCanonicalKeys([.key("/a?utm=1")]), [.key("/a?utm=1")])
        _ = table.storeKey("/a?utm=1", field: "params")
        XCTAssertEqual(table.withCanonicalKeys([.key("/a?utm=7"), .tag("t")]), [.key("/a?utm=7"), .tag("t"), .key("/a")])
    }
}

/// A worker's copy: it follows every change of the shared table.
final class SearchVarianceReaderTests: XCTestCase {
    func testAReaderFollowsTheTable() {
        let table = SearchVariances()
        let reader = SearchVarianceReader(table)
        XCTAssertNil(reader.lookupKey("/a?utm=1"))
        _ = table.storeKey("/a?utm=1", field: "params")
        XCTAssertEqual(reader.lookupKey("/a?utm=2"), "/a")
        _ = table.storeKey("/b?x=1&y=2", field: "key-order")
        XCTAssertEqual(reader.lookupKey("/b?y=2&x=1"), "/b?x=1&y=2")
        _ = table.storeKey("/a?utm=1", field: #"params=("utm")"#)
        XCTAssertEqual(reader.lookupKey("/a?utm=2&q=1"), "/a?q=1", "a changed variance")
        _ = table.storeKey("/a?utm=1", field: nil)
        XCTAssertNil(reader.lookupKey("/a?utm=2"), "a path taken out")
        XCTAssertEqual(reader.lookupKey("/b?y=2&x=1"), "/b?x=1&y=2")
    }
}
