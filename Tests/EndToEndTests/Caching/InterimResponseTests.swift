import Foundation
import XCTest

/// Interim responses (RFC 9110 section 15.2) through the real binary: an
/// origin's 103 Early Hints and 102 reach a waiting client before the
/// answer, over HTTP/1.1 and HTTP/2; their fields are never stored nor
/// merged into the final response, which is cached as usual; an HTTP/1.0
/// client gets none.
final class InterimResponseTests: ConfiguredTestCase {
    /// Every header block curl received (interim ones first), as text.
    private func heads(_ port: Int, _ target: String, _ more: [String] = []) throws -> [String] {
        let r = try runProgram(["curl", "-sS", "-o", "/dev/null", "-D", "-"] + more + ["http://127.0.0.1:\(port)\(target)"])
        XCTAssertEqual(r.status, 0, r.stderr)
        return r.stdout.replacingOccurrences(of: "\r\n", with: "\n").components(separatedBy: "\n\n").filter { !$0.isEmpty }
    }

    func testEarlyHintsReachTheClientFirstAndAreNeverStored() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url)
        let target = "/early?interim=102,103"
        for protocolFlags in [["--http1.1"], ["--http2-prior-knowledge"]] {
            let path = target + (protocolFlags[0] == "--http1.1" ? "&v=1" : "&v=2")
            let miss = try heads(larder.port, path, protocolFlags)
            XCTAssertEqual(miss.count, 3, "\(protocolFlags): \(miss)")
            guard miss.count == 3 else { continue }
            XCTAssertTrue(miss[0].hasPrefix(protocolFlags[0] == "--http1.1" ? "HTTP/1.1 102" : "HTTP/2 102"), miss[0])
            XCTAssertTrue(miss[1].contains(" 103"), miss[1])
            XCTAssertTrue(miss[1].lowercased().contains("link: </style.css>; rel=preload; as=style"), miss[1])
            XCTAssertFalse(miss[1].lowercased().contains("cache-status"), "an interim response is not an answer")
            XCTAssertTrue(miss[2].contains(" 200"), miss[2])
            XCTAssertFalse(miss[2].lowercased().contains("link:"), "the final response keeps its own fields: \(miss[2])")
            XCTAssertFalse(miss[2].lowercased().contains("x-interim"))
            // Cached as usual: the hit has neither the interim responses nor their fields.
            let hit = try heads(larder.port, path, protocolFlags)
            XCTAssertEqual(hit.count, 1, "\(hit)")
            XCTAssertTrue(hit.first?.lowercased().contains("cache-status: larder; hit") == true, "\(hit)")
            XCTAssertFalse(hit.first?.lowercased().contains("link:") ?? true)
            XCTAssertEqual(try origin.count(path), 1)
        }
        // An upstream that sends them without end: at most 8 reach the client.
        let many = try heads(larder.port, "/early?interim=" + Array(repeating: "103", count: 12).joined(separator: ","), ["--http1.1"])
        XCTAssertEqual(many.count, 9, "8 interim responses and the answer: \(many.count)")
        XCTAssertTrue(many.last?.contains(" 200") == true)
        // HTTP/1.0 clients get no 1xx (RFC 9110 section 15.2).
        let old = try heads(larder.port, target + "&v=0", ["--http1.0"])
        XCTAssertEqual(old.count, 1, "\(old)")
        XCTAssertTrue(old.first?.hasPrefix("HTTP/1.0 200") == true || old.first?.hasPrefix("HTTP/1.1 200") == true, "\(old)")
    }
}
