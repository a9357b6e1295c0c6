import HTTPHeaders
import XCTest
@testable import HTTP1

/// A head from fields already split (HTTP/2's) is held to the rules a
/// parsed HTTP/1.1 head is: the same head for the same request, the same
/// error for each kind of bad input.
final class RequestRulesTests: XCTestCase {
    private let limits = ParseLimits(maxTargetBytes: 64, maxHeaderCount: 4, maxBodyBytes: 1000)

    private func fromFields(_ method: String = "GET", _ target: String = "/a", _ fields: HeaderFields = ["host": "example.com"])
        -> Result<RequestHead, HTTPError> {
        RequestRules.head(method: method, target: target, headers: fields, limits: limits)
    }

    private func parsed(_ text: String) -> ParseResult {
        var parser = RequestParser(limits: limits)
        return Array(text.utf8).withUnsafeBytes { parser.parse($0) }
    }

    func testTheSameRequestGivesTheSameHeadEitherWay() throws {
        let fields: HeaderFields = ["host": "example.com", "content-length": "5", "expect": "100-continue", "accept": "*/*"]
        let head = try fromFields("POST", "/x/../y?q=1", fields).get()
        let text = "POST /x/../y?q=1 HTTP/1.1\r\nhost: example.com\r\ncontent-length: 5\r\nexpect: 100-continue\r\naccept: */*\r\n\r\n"
        guard case .complete(let parsedHead, _) = parsed(text) else { return XCTFail("the text parses") }
        XCTAssertEqual(head, parsedHead)
        XCTAssertEqual(head.target, "/y?q=1", "dot segments removed")
        XCTAssertEqual(head.framing, .contentLength(5))
        XCTAssertTrue(head.expectsContinue)
    }

    func testEachKindOfBadInputGetsTheParsersError() {
        let cases: [(String, String, HeaderFields, HTTPError)] = [
            ("G(T", "/", ["host": "a"], .badRequest("malformed method")),
            ("GET", "/", ["host": "a", "x-a": "1", "x-b": "2", "x-c": "3", "x-d": "4"], .headerFieldsTooLarge),
            ("GET", "/", ["host": "a", "x-a": "one\u{1}two"], .badRequest("invalid character in header value")),
            ("GET", "/", ["host": "a", "bad name": "1"], .badRequest("malformed header field")),
            ("GET", "/a b", ["host": "a"], .badRequest("malformed request target")),
            ("GET", "/" + String(repeating: "a", count: 64), ["host": "a"], .uriTooLong),
            ("GET", "", ["host": "a"], .badRequest("missing request target")),
            ("GET", "*", ["host": "a"], .badRequest("'*' target is only for OPTIONS")),
            ("GET", "a/b", ["host": "a"], .badRequest("unsupported request target form")),
            ("GET", "/a/..%2f", ["host": "a"], .badRequest("dot segment next to an encoded slash or a backslash in the path")),
            ("GET", "/", [:], .badRequest("missing Host header")),
            ("GET", "/", ["host": "a b"], .badRequest("invalid Host header")),
            ("POST", "/", ["host": "a", "content-length": "1, 2"], .badRequest("conflicting Content-Length values")),
            ("POST", "/", ["host": "a", "content-length": "-1"], .badRequest("invalid Content-Length")),
            ("POST", "/", ["host": "a", "content-length": "1001"], .contentTooLarge),
        ]
        for (method, target, fields, expected) in cases {
            XCTAssertEqual(fromFields(method, target, fields), .failure(expected), "\(method) \(target) \(fields)")
        }
    }

    func testObsTextInAValueIsKeptAndHTabAllowed() throws {
        let value = [UInt8]([0x61, 0x09, 0xE9]).withUnsafeBytes { FieldBytes.string($0) }
        let head = try fromFields("GET", "/", ["host": "a", "x-latin": value]).get()
        XCTAssertEqual(head.header("x-latin"), value)
    }
}
