import XCTest
@testable import CacheStorage

/// A block the worker reuses for what hits copy into clients' output is
/// written again only when nothing else holds it (a client's queue still
/// sending it keeps its bytes as they were).
final class BytesTests: XCTestCase {
    func testABlockIsReusableOnlyWhenNothingElseHoldsIt() throws {
        var block = try XCTUnwrap(Bytes(count: 8) { $0.initializeMemory(as: UInt8.self, repeating: 1); return true })
        XCTAssertNotNil(block.reusableBuffer(), "held here only")
        var queued: [Bytes] = [block]  // as a client's output queue holds it
        XCTAssertNil(block.reusableBuffer(), "still being sent: never written under it")
        XCTAssertEqual(Array(queued[0].buffer), [UInt8](repeating: 1, count: 8))
        queued.removeAll()
        let buffer = try XCTUnwrap(block.reusableBuffer(), "sent and let go: reused")
        buffer.initializeMemory(as: UInt8.self, repeating: 2)
        XCTAssertEqual(Array(block.buffer), [UInt8](repeating: 2, count: 8))
    }

    func testAFillThatFailsMakesNoBlock() {
        XCTAssertNil(Bytes(count: 4) { _ in false })
    }
}
