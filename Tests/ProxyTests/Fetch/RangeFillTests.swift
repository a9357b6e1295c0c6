import CacheSemantics
import XCTest
@testable import Proxy

/// When a stored piece brings a background fetch of the whole (`range_fill`).
final class RangeFillTests: XCTestCase {
    private let middle = PartialContent.Piece(first: 100, last: 199, length: 1000)

    func testAPieceOfARangeTheClientAskedForFillsTheWhole() {
        XCTAssertTrue(RangeFill.wanted(enabled: true, clientAskedRange: true, stored: middle, largestBody: 1000))
    }

    func testNoFillWhereItIsNotWantedOrCannotBeKept() {
        XCTAssertFalse(RangeFill.wanted(enabled: false, clientAskedRange: true, stored: middle, largestBody: 1000), "range_fill = false")
        XCTAssertFalse(RangeFill.wanted(enabled: true, clientAskedRange: false, stored: middle, largestBody: 1000),
                       "no Range from the client: a completion's rest, whose piece joins the stored one")
        let whole = PartialContent.Piece(first: 0, last: 999, length: 1000)
        XCTAssertFalse(RangeFill.wanted(enabled: true, clientAskedRange: true, stored: whole, largestBody: 1000), "the whole is stored")
        XCTAssertFalse(RangeFill.wanted(enabled: true, clientAskedRange: true, stored: middle, largestBody: 999),
                       "the whole would not fit the tiers")
        XCTAssertFalse(RangeFill.wanted(enabled: true, clientAskedRange: true, stored: middle, largestBody: 0), "nothing is stored")
    }
}
