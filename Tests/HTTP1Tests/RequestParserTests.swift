import XCTest
@testable import HTTP1

final class RequestParserTests: XCTestCase {
    /// Parses `text` whole, then byte by byte, and checks both agree.
    private func parse(_ text: String, limits: ParseLimits = ParseLimits(),
                       file: StaticString = #filePath, line: UInt = #line) -> ParseResult {
        let bytes = Array(text.utf8)
        var whole = RequestParser(limits: limits)
        let wholeResult = bytes.withUnsafeBytes { whole.parse($0) }

        var incremental = RequestParser(limits: limits)
        var byteResult: ParseResult = .incomplete
        for end in 1...bytes.count {
            byteResult = bytes.withUnsafeBytes { incremental.parse(UnsafeRawBufferPointer(rebasing: $0[0..<end])) }
            if case .incomplete = byteResult { continue }
            break
        }
        XCTAssertEqual(wholeResult, byteResult, "whole vs byte-by-byte", file: file, line: line)
        return wholeResult
    }

    private func status(_ result: ParseResult) -> Int? {
        if case .invalid(let e) = result { return e.status }
        return nil
    }

    /// Field names every request carries come out lowercase whatever their
    /// case (taken from literals, not built), and a name that only looks
    /// like one of them is kept as sent.
    func testCommonFieldNamesInAnyCaseAndTheirNearNeighbours() {
        let common = ["Host", "RANGE", "accept", "Cookie", "User-Agent", "CONNECTION", "Content-Type", "Cache-Control",
                      "If-None-Match", "Authorization", "Content-Length", "Accept-Encoding", "Accept-Language",
                      "If-Modified-Since"]
        let near = ["Hosts", "Hos", "X-Host", "Hosu", "User_Agent", "Accept-Encodinh", "Content-Lengths", "Content~Type"]
        var text = "GET / HTTP/1.1\r\n"
        for (i, name) in (common + near).enumerated() { text += "\(name): \(i)\r\n" }
        text += "\r\n"
        guard case .complete(let head, _) = parse(text) else { return XCTFail("not complete") }
        for (i, name) in (common + near).enumerated() {
            XCTAssertEqual(head.headers.first { $0.name == name.lowercased() }?.value, "\(i)", name)
        }
        XCTAssertEqual(head.headers.map(\.name), (common + near).map { $0.lowercased() })
    }

    func testSimpleGet() {
        let text = "GET /a?b=1 HTTP/1.1\r\nHost: example\r\nAccept: */*\r\nX-Pad:  spaced value \t\r\n\r\n"
        guard case .complete(let head, let consumed) = parse(text) else { return XCTFail("not complete") }
        XCTAssertEqual(consumed, text.utf8.count)
        XCTAssertEqual(head.method, "GET")
        XCTAssertEqual(head.target, "/a?b=1")
        XCTAssertEqual(head.minorVersion, 1)
        XCTAssertEqual(head.header("host"), "example")
        XCTAssertEqual(head.header("x-pad"), "spaced value")
        XCTAssertEqual(head.framing, .none)
        XCTAssertTrue(head.keepAlive)
    }

    func testPipelinedRequestsConsumeOnlyTheFirst() {
        let first = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
        let text = first + "GET /2 HTTP/1.1\r\nHost: a\r\n\r\n"
        var parser = RequestParser()
        let result = Array(text.utf8).withUnsafeBytes { parser.parse($0) }
        guard case .complete(let head, let consumed) = result else { return XCTFail() }
        XCTAssertEqual(head.target, "/1")
        XCTAssertEqual(consumed, first.utf8.count)
    }

    func testBodyFramingAndConnection() {
        guard case .complete(let a, _) = parse("POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n") else { return XCTFail() }
        XCTAssertEqual(a.framing, .contentLength(12))
        guard case .complete(let b, _) = parse("POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n") else { return XCTFail() }
        XCTAssertEqual(b.framing, .chunked)
        XCTAssertTrue(b.expectsContinue)
        guard case .complete(let c, _) = parse("GET / HTTP/1.0\r\n\r\n") else { return XCTFail() }
        XCTAssertFalse(c.keepAlive)
        guard case .complete(let d, _) = parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n") else { return XCTFail() }
        XCTAssertTrue(d.keepAlive)
        guard case .complete(let e, _) = parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n") else { return XCTFail() }
        XCTAssertFalse(e.keepAlive)
        guard case .complete(let f, _) = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n") else { return XCTFail() }
        XCTAssertEqual(f.framing, .contentLength(5))
    }

    func testLeadingEmptyLinesAreIgnored() {
        guard case .complete(let head, _) = parse("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n") else { return XCTFail() }
        XCTAssertEqual(head.target, "/")
    }

    func testAbsoluteFormTarget() {
        guard case .complete(let head, _) = parse("GET http://example.com/x/y?z=1 HTTP/1.1\r\nHost: example.com\r\n\r\n") else { return XCTFail() }
        XCTAssertEqual(head.pathAndQuery, "/x/y?z=1")
        guard case .complete(let bare, _) = parse("GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n") else { return XCTFail() }
        XCTAssertEqual(bare.pathAndQuery, "/")
        // The target's authority is the host, whatever Host said (RFC 9112 section 3.2.2).
        guard case .complete(let other, _) = parse("GET http://b.example:81/x HTTP/1.1\r\nHost: a.example\r\nX: y\r\n\r\n")
        else { return XCTFail() }
        XCTAssertEqual(other.header("host"), "b.example:81")
        XCTAssertEqual(other.headers.values("host"), ["b.example:81"])
        XCTAssertEqual(other.header("x"), "y")
        guard case .complete(let old, _) = parse("GET http://b.example/x HTTP/1.0\r\n\r\n") else { return XCTFail() }
        XCTAssertEqual(old.header("host"), "b.example")
    }

    /// A Host that is not `uri-host [ ":" port ]` is refused (RFC 9112
    /// section 3.2: a MUST), so no cache key or route is made of it.
    func testHostValues() {
        let valid = ["a", "a.example:8080", "A-b_c~d.example", "[::1]", "[::1]:80", "[v1.x]", "a%2Db", "a:", "", "!$&'()*+,;="]
        for host in valid {
            guard case .complete(let head, _) = parse("GET / HTTP/1.1\r\nHost: \(host)\r\n\r\n") else {
                XCTFail("refused \(host)"); continue
            }
            XCTAssertEqual(head.header("host"), host)
        }
        let invalid = ["a b", "a/b", "a:8x", "a:80:80", "[::1", "[]", "[::1]x", "u@a", "a%2", "a%zz", "a\"b", "a?b", "a#b",
                       "\u{e9}.example"]
        for host in invalid {
            XCTAssertEqual(status(parse("GET / HTTP/1.1\r\nHost: \(host)\r\n\r\n")), 400, host)
        }
        XCTAssertEqual(status(parse("GET http://u@a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n")), 400, "userinfo")
        XCTAssertEqual(status(parse("GET http:///x HTTP/1.1\r\nHost: a.example\r\n\r\n")), 400, "no authority")
        XCTAssertEqual(status(parse("GET http://a b/ HTTP/1.1\r\nHost: a\r\n\r\n")), 400, "space")
    }

    /// Every malformed shape in docs/limits-and-errors.md's error table, with its status.
    func testMalformedRequests() {
        let cases: [(String, String, Int)] = [
            ("CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            ("conflicting CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400),
            ("conflicting CL list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n", 400),
            ("non-numeric CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5x\r\n\r\n", 400),
            ("negative CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
            ("unknown TE", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
            ("chunked not last", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400),
            ("TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            ("obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400),
            ("space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),
            ("no colon", "GET / HTTP/1.1\r\nHost a\r\n\r\n", 400),
            ("missing Host", "GET / HTTP/1.1\r\nAccept: x\r\n\r\n", 400),
            ("two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            ("NUL in value", "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{0}b\r\n\r\n", 400),
            ("bare CR", "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", 400),
            ("HTTP/0.9", "GET /\r\n\r\n", 400),
            ("lowercase version", "GET / http/1.1\r\nHost: a\r\n\r\n", 400),
            ("HTTP/2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
            ("bad method", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("two spaces", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("relative target", "GET abc HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("CONNECT authority", "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("CL over limit", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999\r\n\r\n", 413),
        ]
        for (name, text, expected) in cases {
            XCTAssertEqual(status(parse(text)), expected, name)
        }
    }

    func testLongTargetIs414WithoutWaitingForTheEnd() {
        let limits = ParseLimits(maxTargetBytes: 100, maxHeaderBytes: 4096)
        let complete = "GET /" + String(repeating: "a", count: 200) + " HTTP/1.1\r\nHost: a\r\n\r\n"
        XCTAssertEqual(status(parse(complete, limits: limits)), 414)
        var parser = RequestParser(limits: limits)
        let partial = Array(("GET /" + String(repeating: "a", count: 200)).utf8)
        XCTAssertEqual(status(partial.withUnsafeBytes { parser.parse($0) }), 414)
    }

    func testLargeHeaderSectionIs431() {
        let limits = ParseLimits(maxHeaderBytes: 1024, maxHeaderCount: 10)
        let big = "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "v", count: 2000) + "\r\n\r\n"
        XCTAssertEqual(status(parse(big, limits: limits)), 431)
        var parser = RequestParser(limits: limits)
        let endless = Array(("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "v", count: 2000)).utf8)
        XCTAssertEqual(status(endless.withUnsafeBytes { parser.parse($0) }), 431)
        let many = "GET / HTTP/1.1\r\nHost: a\r\n" + (0..<20).map { "X\($0): v\r\n" }.joined() + "\r\n"
        XCTAssertEqual(status(parse(many, limits: limits)), 431)
    }

    func testARequestLineThatCannotBeHTTPIsRefusedBeforeItEnds() {
        // A TLS client hello on the plain port: no line end may ever come.
        var parser = RequestParser()
        let hello: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03]
        XCTAssertEqual(status(hello.withUnsafeBytes { parser.parse($0) }), 400)
        var binary = RequestParser()
        XCTAssertEqual(status(Array("GE\u{1}T / HTTP/1.1".utf8).withUnsafeBytes { binary.parse($0) }), 400)
        // The same answer whole and byte by byte; a CR may still begin an empty line.
        XCTAssertEqual(status(parse("G\u{16}T / HTTP/1.1\r\n\r\n")), 400)
        XCTAssertEqual(status(parse("\u{16}\u{3}\u{1}\r\n\r\n")), 400)
        var split = RequestParser()
        XCTAssertEqual(Array("\r".utf8).withUnsafeBytes { split.parse($0) }, .incomplete)
        guard case .complete = parse("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n") else { return XCTFail("an empty line first is fine") }
    }

    func testIncompleteStaysIncomplete() {
        var parser = RequestParser()
        let text = Array("GET / HTTP/1.1\r\nHost: a\r\n".utf8)
        XCTAssertEqual(text.withUnsafeBytes { parser.parse($0) }, .incomplete)
    }
}
