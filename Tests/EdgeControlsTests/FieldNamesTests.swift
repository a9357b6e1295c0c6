import EdgeControls
import XCTest

final class FieldNamesTests: XCTestCase {
    private func filtered(_ head: String, dropping names: [String]) -> String {
        let drops = FieldNames(names)
        defer { drops.deallocate() }
        var out: [UInt8] = []
        Array(head.utf8).withUnsafeBytes { drops.appendHead($0, to: &out) }
        return String(decoding: out, as: UTF8.self)
    }

    func testAStoredHeadLosesOnlyTheFieldsNamedInAnyCase() {
        let head = "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: text/html\r\nSERVER: again\r\nX-Served-By: a\r\nserver-timing: 1\r\nContent-Length: 5\r\n"
        XCTAssertEqual(filtered(head, dropping: ["server"]),
                       "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Served-By: a\r\nserver-timing: 1\r\nContent-Length: 5\r\n")
        XCTAssertEqual(filtered(head, dropping: ["server", "x-served-by", "content-type"]),
                       "HTTP/1.1 200 OK\r\nserver-timing: 1\r\nContent-Length: 5\r\n")
        XCTAssertEqual(filtered(head, dropping: []), head)
        XCTAssertEqual(filtered(head, dropping: ["content-length"]).hasSuffix("server-timing: 1\r\n"), true)
        // The status line stays whatever it says.
        XCTAssertEqual(filtered("HTTP/1.1 200 Server: OK\r\nA: 1\r\n", dropping: ["server"]), "HTTP/1.1 200 Server: OK\r\nA: 1\r\n")
    }

    func testNamesAreMatchedWhole() {
        let drops = FieldNames(["server", "x-a"])
        defer { drops.deallocate() }
        XCTAssertTrue(drops.contains("server"))
        XCTAssertFalse(drops.contains("servers"))
        XCTAssertFalse(drops.contains("x-"))
        XCTAssertTrue(Array("X-A".utf8).withUnsafeBytes { drops.contains(bytes: $0) })
        XCTAssertFalse(Array("X-B".utf8).withUnsafeBytes { drops.contains(bytes: $0) })
        XCTAssertTrue(FieldNames([]).isEmpty)
    }
}
