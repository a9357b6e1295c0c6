import HTTPHeaders
import XCTest
@testable import HTTP1

final class ResponseSerializerTests: XCTestCase {
    func testDecimalAndChunkHeader() {
        for n in [0, 7, 10, 99, 12345, Int(Int32.max)] {
            var out: [UInt8] = []
            ResponseSerializer.appendDecimal(n, to: &out)
            XCTAssertEqual(String(decoding: out, as: UTF8.self), String(n))
        }
        XCTAssertEqual(ResponseSerializer.chunkHeader(0), Array("0\r\n".utf8))
        XCTAssertEqual(ResponseSerializer.chunkHeader(255), Array("ff\r\n".utf8))
        XCTAssertEqual(ResponseSerializer.chunkHeader(4096), Array("1000\r\n".utf8))
    }

    func testHeadPrefixAndCanonicalNames() {
        let head = ResponseSerializer.headPrefix(status: 404, headers: [HeaderField(name: "content-type", value: "text/plain")])
        XCTAssertEqual(String(decoding: head, as: UTF8.self), "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n")
        XCTAssertEqual(ResponseSerializer.canonicalName("x-forwarded-for"), "X-Forwarded-For")
        XCTAssertEqual(ResponseSerializer.canonicalName("etag"), "ETag")
    }

    func testHopByHopStripIncludesConnectionNominees() {
        let headers: HeaderFields = ["connection": "close, X-Private", "x-private": "1", "keep-alive": "5", "accept": "*/*"]
        XCTAssertEqual(HopByHop.strip(headers).map(\.name), ["accept"])
    }

    func testHopByHopNamesWithoutHashing() {
        for name in HopByHop.names { XCTAssertTrue(HopByHop.isHopByHop(name), name) }
        for name in ["t", "tf", "trailers", "connectio", "keep-alivf", "x-connection", "transfer-encodings", "content-length", ""] {
            XCTAssertFalse(HopByHop.isHopByHop(name), name)
        }
    }

    func testPlainConnectionValuesNominateNothingElse() {
        XCTAssertEqual(HopByHop.nominated(byConnectionValues: ["keep-alive"]), [])
        XCTAssertEqual(HopByHop.nominated(byConnectionValues: ["Keep-Alive", "CLOSE"]), [])
        XCTAssertEqual(HopByHop.nominated(byConnectionValues: ["keep-alive, X-Trace"]), ["keep-alive", "x-trace"])
        XCTAssertEqual(HopByHop.nominated(byConnectionValues: ["x-private"]), ["x-private"])
        XCTAssertEqual(HopByHop.nominated(byConnectionValues: ["keep\ralive"]), ["keep\ralive"])  // not the plain value
        XCTAssertEqual(HopByHop.nominated(inFields: ["connection": "keep-alive", "x-a": "1"]), [])
        XCTAssertEqual(HopByHop.nominated(inFields: ["connection": "close", "connection": "X-A, x-b", "x-a": "1"]), ["x-a", "x-b"])
    }

    /// The word-at-a-time check agrees with a plain case-insensitive
    /// comparison for every one-byte change of the two plain values.
    func testPlainConnectionValueCheckAgreesWithCaseInsensitiveComparison() {
        func reference(_ v: [UInt8]) -> Bool {
            let lower = v.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
            return lower == Array("keep-alive".utf8) || lower == Array("close".utf8)
        }
        for plain in ["keep-alive", "close", "KEEP-ALIVE", "Close"] {
            let bytes = Array(plain.utf8)
            for position in bytes.indices {
                for byte in UInt8(1)...UInt8(127) {
                    var changed = bytes
                    changed[position] = byte
                    let value = String(decoding: changed, as: UTF8.self)
                    XCTAssertEqual(HopByHop.isPlainConnectionValue(value), reference(changed), "\(changed)")
                }
            }
        }
        XCTAssertFalse(HopByHop.isPlainConnectionValue("keep-alive "))
        XCTAssertFalse(HopByHop.isPlainConnectionValue("clos"))
        XCTAssertFalse(HopByHop.isPlainConnectionValue(""))
    }

    func testFieldsAreSerializedWithTheirUsualSpelling() {
        let cases: [(String, String, String)] = [
            ("content-type", "text/plain", "Content-Type: text/plain\r\n"), ("etag", "\"x\"", "ETag: \"x\"\r\n"),
            ("te", "trailers", "TE: trailers\r\n"), ("dnt", "1", "DNT: 1\r\n"), ("content-md5", "abc", "Content-MD5: abc\r\n"),
            ("www-authenticate", "Basic", "WWW-Authenticate: Basic\r\n"), ("x-xss-protection", "0", "X-XSS-Protection: 0\r\n"),
            ("x-empty", "", "X-Empty: \r\n"), ("a--b-", "v", "A--B-: v\r\n"), ("1x-y", "v", "1x-Y: v\r\n"),
        ]
        for (name, value, expected) in cases {
            var out: [UInt8] = Array("prefix\r\n".utf8)
            ResponseSerializer.appendField(name, value, to: &out)
            XCTAssertEqual(String(decoding: out, as: UTF8.self), "prefix\r\n" + expected)
        }
        // A value is its bytes, one per scalar (FieldBytes): U+00E9 is 0xE9.
        var latin: [UInt8] = []
        ResponseSerializer.appendField("x-y", "caf\u{E9}", to: &latin)
        XCTAssertEqual(latin, Array("X-Y: caf".utf8) + [0xE9, 0x0D, 0x0A])
        let long = String(repeating: "x-long", count: 300)
        var out: [UInt8] = []
        ResponseSerializer.appendField(long, long, to: &out)
        XCTAssertEqual(String(decoding: out, as: UTF8.self), ResponseSerializer.canonicalName(long) + ": " + long + "\r\n")
    }

    func testStatusLineParsing() {
        XCTAssertEqual(ResponseLine.status("HTTP/1.1 200 OK"), 200)
        XCTAssertEqual(ResponseLine.status("HTTP/2 304"), 304)
        XCTAssertNil(ResponseLine.status("SIP/2.0 200 OK"))
        XCTAssertEqual(ResponseLine.field("Cache-Control:  max-age=5 \r\n"), HeaderField(name: "cache-control", value: "max-age=5"))
    }

    /// The byte reading of status lines gives what the string functions give.
    func testStatusLineFromBytesAgreesWithTheStringReading() {
        let lines = ["HTTP/1.1 200 OK", "HTTP/2 304", "HTTP/1.1 404 Not Found", "HTTP/1.1 200 ", "HTTP/1.1 200  Spaced  ",
                     "HTTP/1.0 999 x", "HTTP/1.1 099 Low", "HTTP/1.1 20x OK", "HTTP/1.1  200 OK", "HTTP/1.1 2000 OK",
                     "HTTP/1.1", "SIP/2.0 200 OK", "HTTP/1.1 +12 OK", "HTTP/1.1 200\tTab"]
        for line in lines {
            let fromBytes = Array(line.utf8).withUnsafeBytes { ResponseLine.statusAndReason(bytes: $0) }
            XCTAssertEqual(fromBytes?.status, ResponseLine.status(line), line)
            if fromBytes != nil { XCTAssertEqual(fromBytes?.reason, ResponseLine.reason(line), line) }
        }
    }
}
