import EdgeControls
import XCTest
@testable import Proxy

/// A worker's edited heads: a kept result (the head without the dropped
/// fields, then the rules' literal lines) answers only the same head bytes
/// under the same rules.
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
            let lines = Array("Set-By: rules \(generation)\r\n".utf8)
            return lines.withUnsafeBytes { lines in
                let head = UnsafeRawBufferPointer(rebasing: buffer[..<bytes.count])
                guard let kept = heads.edited(head, drops: drops, lines: lines, generation: generation) else { return "not kept" }
                var afresh: [UInt8] = []
                EditedHeads.append(head, drops: drops, lines: lines, to: &afresh)
                XCTAssertEqual(Array(kept), afresh, "kept as computed afresh")
                return String(decoding: kept, as: UTF8.self)
            }
        }
        let head = "HTTP/1.1 200 OK\r\nServer: a\r\nB: 1\r\n"
        XCTAssertEqual(edit(head, generation: 1), "HTTP/1.1 200 OK\r\nB: 1\r\nSet-By: rules 1\r\n")
        XCTAssertEqual(edit(head, generation: 1), "HTTP/1.1 200 OK\r\nB: 1\r\nSet-By: rules 1\r\n")
        // Another head at the same address (a freed block's successor) is filtered afresh.
        XCTAssertEqual(edit("HTTP/1.1 200 OK\r\nServer: a\r\nB: 2\r\n", generation: 1), "HTTP/1.1 200 OK\r\nB: 2\r\nSet-By: rules 1\r\n")
        XCTAssertEqual(edit("HTTP/1.1 404 No\r\nServer: a\r\nB: 2\r\n", generation: 2), "HTTP/1.1 404 No\r\nB: 2\r\nSet-By: rules 2\r\n")
        // The same head under other rules: their lines, not the kept ones.
        XCTAssertEqual(edit(head, generation: 1), "HTTP/1.1 200 OK\r\nB: 1\r\nSet-By: rules 1\r\n")
        XCTAssertEqual(edit(head, generation: 3), "HTTP/1.1 200 OK\r\nB: 1\r\nSet-By: rules 3\r\n")
    }

    func testAHeadOverTheLargestIsNotKept() {
        let drops = FieldNames(["server"])
        defer { drops.deallocate() }
        let head = Array("HTTP/1.1 200 OK\r\nServer: a\r\nLong: \(String(repeating: "x", count: EditedHeads.largest))\r\n".utf8)
        head.withUnsafeBytes { head in
            XCTAssertNil(EditedHeads().edited(head, drops: drops, lines: UnsafeRawBufferPointer(start: nil, count: 0), generation: 1))
            var out: [UInt8] = []
            EditedHeads.append(head, drops: drops, lines: UnsafeRawBufferPointer(start: nil, count: 0), to: &out)
            XCTAssertFalse(String(decoding: out, as: UTF8.self).contains("Server"))
        }
    }
}
