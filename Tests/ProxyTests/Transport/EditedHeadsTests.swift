import EdgeControls
import XCTest
@testable import Proxy

/// A worker's edited heads: a kept result answers only the same head
/// bytes under the same rules.
final class EditedHeadsTests: XCTestCase {
    func testAKeptResultAnswersOnlyTheSameHeadAndRules() {
        let heads = EditedHeads()
        let drops = FieldNames(["server"])
        defer { drops.deallocate() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
        defer { buffer.deallocate() }
        func edit(_ text: String, generation: UInt64) -> String {
            let bytes = Array(text.utf8)
            buffer.copyBytes(from: bytes)  // the same address for every head: one slot
            var out: [UInt8] = []
            heads.append(UnsafeRawBufferPointer(rebasing: buffer[..<bytes.count]), drops: drops, generation: generation, to: &out)
            return String(decoding: out, as: UTF8.self)
        }
        XCTAssertEqual(edit("HTTP/1.1 200 OK\r\nServer: a\r\nB: 1\r\n", generation: 1), "HTTP/1.1 200 OK\r\nB: 1\r\n")
        XCTAssertEqual(edit("HTTP/1.1 200 OK\r\nServer: a\r\nB: 1\r\n", generation: 1), "HTTP/1.1 200 OK\r\nB: 1\r\n")
        // Another head at the same address (a freed block's successor) is filtered afresh.
        XCTAssertEqual(edit("HTTP/1.1 200 OK\r\nServer: a\r\nB: 2\r\n", generation: 1), "HTTP/1.1 200 OK\r\nB: 2\r\n")
        XCTAssertEqual(edit("HTTP/1.1 404 No\r\nServer: a\r\nB: 2\r\n", generation: 2), "HTTP/1.1 404 No\r\nB: 2\r\n")
    }
}
