import XCTest
@testable import HTTP1

final class ChunkedDecoderTests: XCTestCase {
    private func decode(_ text: String, byteByByte: Bool, max: Int = 1 << 20) -> (ChunkedDecoder.Outcome, [UInt8]) {
        var decoder = ChunkedDecoder(maxBodyBytes: max)
        var body: [UInt8] = []
        let bytes = Array(text.utf8)
        if !byteByByte {
            let outcome = bytes.withUnsafeBytes { decoder.decode($0) { body.append(contentsOf: $0) } }
            return (outcome, body)
        }
        var total = 0
        for b in bytes {
            let outcome = [b].withUnsafeBytes { decoder.decode($0) { body.append(contentsOf: $0) } }
            switch outcome {
            case .needMore: total += 1
            case .done(let consumed): return (.done(consumed: total + consumed), body)
            case .invalid: return (outcome, body)
            }
        }
        return (.needMore, body)
    }

    func testValidBodyWholeAndByteByByte() {
        let text = "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\nGET /next"
        for mode in [false, true] {
            let (outcome, body) = decode(text, byteByByte: mode)
            XCTAssertEqual(outcome, .done(consumed: text.utf8.count - "GET /next".utf8.count))
            XCTAssertEqual(String(decoding: body, as: UTF8.self), "hello world")
        }
    }

    func testUppercaseHexAndBareLF() {
        let (outcome, body) = decode("A\nabcdefghij\n0\n\n", byteByByte: false)
        XCTAssertEqual(outcome, .done(consumed: 16))
        XCTAssertEqual(body.count, 10)
    }

    func testMalformedChunks() {
        let cases: [(String, Int)] = [
            ("zz\r\n", 400),
            ("5\r\nhelloXX", 400),
            ("\r\n", 400),
            ("1234567890abcdef0\r\n", 400),
            ("5\rx", 400),
        ]
        for (text, status) in cases {
            for mode in [false, true] {
                guard case .invalid(let error) = decode(text, byteByByte: mode).0 else { XCTFail(text); continue }
                XCTAssertEqual(error.status, status, text)
            }
        }
    }

    func testBodyOverLimitIs413() {
        guard case .invalid(let error) = decode("10\r\n", byteByByte: false, max: 8).0 else { return XCTFail() }
        XCTAssertEqual(error.status, 413)
    }
}
