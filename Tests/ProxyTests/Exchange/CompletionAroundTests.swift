import CacheSemantics
import CacheStorage
import HTTPHeaders
import XCTest
@testable import Proxy

/// A piece inside what the client wants, completed by a multipart 206:
/// the client's bytes in order, whatever order the parts come in.
final class CompletionAroundTests: XCTestCase {
    private let whole: [UInt8] = (0..<100).map { UInt8(65 + $0 % 26) }

    private func around() -> CompletionAround {
        let held = PartialContent.Piece(first: 40, last: 59, length: 100)
        let body = Array(whole[40...59])
        var headers: HeaderFields = ["cache-control": "max-age=60", "etag": "\"v1\"", "content-range": "bytes 40-59/100"]
        headers.append("content-type", "text/plain")
        let piece = body.withUnsafeBytes {
            StoredResponseBuilder(shared: true, targetedField: "x").build(
                key: "/p", status: 206, reason: nil, headers: headers, body: $0,
                timing: ResponseTiming(requestTime: 1, responseTime: 1, dateValue: 1, ageValue: 0), tags: [], varyFrom: { _ in nil })
        }
        let completion = Completion(piece: piece, held: held, wanted: PartialContent.Piece(first: 0, last: 99, length: 100),
                                    answersWhole: true)
        return CompletionAround(completion, contentRange: nil, contentType: "multipart/byteranges; boundary=S")
    }

    private func multipart(_ ranges: [ClosedRange<Int>], total: Int = 100) -> [UInt8] {
        var out: [UInt8] = []
        for r in ranges {
            out += Array("--S\r\nContent-Range: bytes \(r.lowerBound)-\(r.upperBound)/\(total)\r\n\r\n".utf8) + whole[r] + Array("\r\n".utf8)
        }
        return out + Array("--S--\r\n".utf8)
    }

    /// What the client gets, fed in pieces of `step` bytes.
    private func answer(_ body: [UInt8], step: Int) -> ([UInt8], Bool) {
        var a = around()
        var out: [UInt8] = []
        let collect: (CompletionAround.Output) -> Void = { output in
            switch output {
            case .upstream(let bytes): out += bytes
            case .stored(let sent): out += self.whole[sent.first...sent.last]
            }
        }
        var at = 0
        while at < body.count {
            let end = min(at + step, body.count)
            Array(body[at..<end]).withUnsafeBytes { a.take($0, collect) }
            at = end
        }
        let whole = a.finish(collect)
        return (out, whole)
    }

    func testPartsInOrderOrReversedGiveTheSameAnswer() {
        for ranges in [[0...39, 60...99], [60...99, 0...39]] {
            for step in [1, 7, 1000] {
                let (out, whole) = answer(multipart(ranges), step: step)
                XCTAssertTrue(whole, "\(ranges) by \(step)")
                XCTAssertEqual(out, self.whole, "\(ranges) by \(step): every byte once, in order")
            }
        }
    }

    func testAnswersThatCannotBeWholeSayNot() {
        let missing = answer(multipart([60...99]), step: 5)
        XCTAssertFalse(missing.1, "a part never came")
        XCTAssertEqual(missing.0, [], "the held part never goes before its turn")
        XCTAssertFalse(answer(multipart([0...39, 60...99], total: 101), step: 5).1, "another representation's length")
        var truncated = multipart([0...39, 60...99])
        truncated.removeLast(30)
        XCTAssertFalse(answer(truncated, step: 5).1, "cut short")
    }
}
