import HTTPHeaders
import XCTest
@testable import HTTP1

/// Field values are bytes (RFC 9110 section 5.5): obs-text survives parsing
/// and serializing unchanged, UTF-8 or not.
final class FieldBytesTests: XCTestCase {
    func testEveryByteSurvivesARoundTrip() {
        let all = [UInt8](0x20...0xFF) + [0x09]
        let text = all.withUnsafeBytes { FieldBytes.string($0) }
        var back: [UInt8] = []
        FieldBytes.append(text, to: &back)
        XCTAssertEqual(back, all)
        XCTAssertEqual(FieldBytes.withBytes(text) { Array($0) }, all)
    }

    func testValidUTF8StaysTheSameBytes() {
        let utf8 = Array("café ☕".utf8)
        var back: [UInt8] = []
        FieldBytes.append(utf8.withUnsafeBytes { FieldBytes.string($0) }, to: &back)
        XCTAssertEqual(back, utf8)
    }

    func testParsedValueIsSerializedByteForByte() throws {
        let raw = Array("GET / HTTP/1.1\r\nHost: a\r\nX-Name: caf".utf8) + [0xE9, 0x20, 0xFF] + Array("\r\n\r\n".utf8)
        var parser = RequestParser()
        guard case .complete(let head, _) = raw.withUnsafeBytes({ parser.parse($0) }) else { return XCTFail("not parsed") }
        var out: [UInt8] = []
        ResponseSerializer.appendField("x-name", try XCTUnwrap(head.header("x-name")), to: &out)
        XCTAssertEqual(out, Array("X-Name: caf".utf8) + [0xE9, 0x20, 0xFF, 0x0D, 0x0A])
    }

    func testUpstreamFieldLineKeepsItsBytes() throws {
        let line = Array("Content-Disposition: filename=\"caf".utf8) + [0xE9] + Array(".txt\"".utf8)
        let field = try XCTUnwrap(line.withUnsafeBytes { ResponseLine.field(bytes: $0) })
        var out: [UInt8] = []
        FieldBytes.append(field.value, to: &out)
        XCTAssertEqual(out, Array("filename=\"caf".utf8) + [0xE9] + Array(".txt\"".utf8))
    }
}

/// RFC 3986 section 5.2.4, with percent-encoded dots, applied when parsing.
final class DotSegmentsTests: XCTestCase {
    func testDotSegmentsAreRemoved() {
        let cases: [(String, String)] = [
            ("/a/b/../c", "/a/c"), ("/a/./b", "/a/b"), ("/../secret", "/secret"), ("/a/..", "/"), ("/a/.", "/a/"),
            ("/a/b/..", "/a/"), ("/a//../b", "/a/b"), ("/static/../private/r1?x=/../y", "/private/r1?x=/../y"),
            ("/static/%2e%2e/private", "/private"), ("/static/%2E./p", "/p"), ("/s/.%2E/p", "/p"), ("/a/%2e/b", "/a/b"),
            ("/..", "/"), ("/.", "/"), ("/../../..", "/"), ("/a/...", "/a/..."), ("/a/..b/c", "/a/..b/c"),
            ("/file.txt", "/file.txt"), ("/", "/"), ("/a?b", "/a?b"), ("*", "*"), ("/%2e%2f", "/%2e%2f"),
            ("http://h.example/a/../b?q", "http://h.example/b?q"), ("http://h.example", "http://h.example"),
            ("https://h.example:8/../../x", "https://h.example:8/x"),
        ]
        for (input, expected) in cases { XCTAssertEqual(DotSegments.normalize(input), expected, input) }
    }

    func testDotSegmentsBehindOtherSeparatorsAreAmbiguous() {
        for target in ["/static/..%2fprivate", "/static/..%2Fprivate", "/static/..\\private", "/s/%2e%2e%5cp", "/a/.%2fb",
                       "/a%2f..", "/a\\.\\b?q"] {
            XCTAssertTrue(DotSegments.isAmbiguous(DotSegments.normalize(target)), target)
        }
        for target in ["/files/a%2Fb", "/a\\b", "/a/..b%2f", "/a?x=..%2f", "/a%2fb.c"] {
            XCTAssertFalse(DotSegments.isAmbiguous(DotSegments.normalize(target)), target)
        }
        var parser = RequestParser()
        let raw = Array("GET /static/..%2Fprivate/r1 HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
        guard case .invalid(let error) = raw.withUnsafeBytes({ parser.parse($0) }) else { return XCTFail("accepted") }
        XCTAssertEqual(error.status, 400)
    }

    func testTheParserHandsOnTheNormalizedTarget() {
        var parser = RequestParser()
        let raw = Array("GET /static/../private/r1 HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
        guard case .complete(let head, _) = raw.withUnsafeBytes({ parser.parse($0) }) else { return XCTFail("not parsed") }
        XCTAssertEqual(head.target, "/private/r1")
        XCTAssertEqual(head.pathAndQuery, "/private/r1")
    }
}

/// RFC 9112 section 6.3 for responses a proxy forwards.
final class ResponseFramingTests: XCTestCase {
    func testControlBytesInUpstreamValuesBecomeSpaces() throws {
        let line = Array("X-Split: a".utf8) + [0x0D, 0x00, 0x01] + Array("b".utf8)
        let field = try XCTUnwrap(line.withUnsafeBytes { ResponseLine.field(bytes: $0) })
        XCTAssertEqual(field.value, "a   b")
    }

    func testTransferEncodingWinsAndBadLengthsAreInvalid() {
        XCTAssertEqual(ResponseFraming.of(["content-length": "3", "transfer-encoding": "chunked"]), .transferCoded)
        XCTAssertEqual(ResponseFraming.of(["transfer-encoding": "chunked", "content-length": "x"]), .transferCoded)
        XCTAssertEqual(ResponseFraming.of(["content-length": "5"]), .length(5))
        XCTAssertEqual(ResponseFraming.of(["content-length": "5", "content-length": "5, 5"]), .length(5))
        XCTAssertEqual(ResponseFraming.of(["content-length": " 0 "]), .length(0))
        XCTAssertEqual(ResponseFraming.of(["content-length": "999999999999999999"]), .length(999_999_999_999_999_999))
        XCTAssertEqual(ResponseFraming.of(["content-type": "text/plain"]), .unspecified)
        for bad in ["3, 5", "+3", "-1", "", "0x10", "1 2", "99999999999999999999", "9999999999999999999", "5,", ",5", "5,,5"] {
            guard case .invalid = ResponseFraming.of(["content-length": bad]) else { return XCTFail(bad) }
        }
        guard case .invalid = ResponseFraming.of(["content-length": "3", "content-length": "4"]) else { return XCTFail() }
    }
}
