import Bytes
import Foundation
import XCTest
@testable import Telemetry

/// What the access log's cache column says of the Cache-Status sent.
final class AccessRecordTests: XCTestCase {
    private func column(_ sent: String) -> String {
        var record = AccessRecord()
        record.note(status: 200, result: .hit, queuedWhole: true, cacheStatus: Array(sent.utf8), bodyBytes: nil)
        return record.cacheColumn
    }

    func testTheColumnIsTheValueWithoutFieldNameCacheNameOrLineEnd() {
        XCTAssertEqual(column("Cache-Status: larder; hit; ttl=55\r\n"), "hit; ttl=55", "a hit sends the whole line")
        XCTAssertEqual(column("larder; fwd=uri-miss; stored"), "fwd=uri-miss; stored", "a forward notes the value")
        XCTAssertEqual(column(""), "-", "nothing sent (a 400 before any lookup)")
        XCTAssertEqual(AccessRecord().cacheColumn, "-")
    }

    func testItIsTakenOnce() {
        var record = AccessRecord()
        XCTAssertTrue(record.takeTurn())
        XCTAssertFalse(record.takeTurn(), "an exchange ended twice (cancelled, then completed) is counted and logged once")
    }

    func testWithTheLogOffTheCacheStatusIsNotKeptButTheTimesAre() {
        var record = AccessRecord(logging: false)
        XCTAssertNil(record.latencies(), "nothing answered yet")
        record.note(status: 200, result: .miss, queuedWhole: false, cacheStatus: Array("larder; fwd=uri-miss".utf8), bodyBytes: 5)
        XCTAssertEqual(record.status, 200)
        XCTAssertEqual(record.result, .miss)
        XCTAssertEqual(record.cacheColumn, "-")
        let (firstByte, total) = record.latencies()!
        XCTAssertGreaterThanOrEqual(firstByte, 0)
        XCTAssertGreaterThanOrEqual(total, firstByte, "the last byte comes after the first")
    }
}

/// The access log's lines, text and JSON: always valid JSON, whatever a target holds.
final class AccessLineTests: XCTestCase {
    private func format(_ target: String, cache: String = "hit; ttl=5", json: Bool,
                        upstream: (Int, Int)? = nil) -> String {
        let out = ByteBuffer()
        var formatter = AccessLineFormatter()
        let figures = AccessLine.Figures(time: 0, worker: 3, status: 200, bodyBytes: 5, firstByteMicroseconds: 1_234,
                                         totalMicroseconds: 56, result: .hit, upstreamStatus: upstream?.0,
                                         upstreamMicroseconds: upstream?.1)
        AccessLine.with(figures, client: "::1", method: "GET", target: target, cache: Array(cache.utf8)) { line in
            if json { formatter.appendJSON(line, to: out) } else { formatter.appendText(line, to: out) }
        }
        return String(decoding: out.bytes, as: UTF8.self)
    }

    func testStringsAreEscapedAndTimesHaveMicrosecondDigits() throws {
        let text = format("/a\"b\\c\u{1}d\u{7F}", json: true)
        XCTAssertTrue(text.hasSuffix("}\n"))
        XCTAssertTrue(text.contains(#""target":"/a\"b\\c\u0001d\u007f""#), text)
        XCTAssertTrue(text.contains(#""first_byte_ms":1.234,"total_ms":0.056"#), text)
        XCTAssertTrue(text.contains(#""upstream_addr":"","#), "no upstream answered: \(text)")
        XCTAssertFalse(text.contains("upstream_status") || text.contains("tls_sni"), text)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        XCTAssertEqual(object["target"] as? String, "/a\"b\\c\u{1}d\u{7F}")
        XCTAssertEqual(object["worker"] as? Int, 3)
        XCTAssertEqual(object["time"] as? String, "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(object["cache"] as? String, "hit; ttl=5")
    }

    func testTheUpstreamAndAnEmptyCacheColumn() throws {
        let text = format("/x", cache: "", json: true, upstream: (503, 12_345_678))
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        XCTAssertEqual(object["cache"] as? String, "-")
        XCTAssertEqual(object["upstream_status"] as? Int, 503)
        XCTAssertTrue(text.contains(#""upstream_ms":12345.678"#), text)
    }

    func testTheTextLine() {
        XCTAssertEqual(format("/x?y=1", json: false), "1970-01-01T00:00:00.000Z ::1 GET /x?y=1 200 5 0 \"hit; ttl=5\" - HTTP/1.1 - -\n")
        XCTAssertEqual(format("/x", cache: "", json: false), "1970-01-01T00:00:00.000Z ::1 GET /x 200 5 0 \"-\" - HTTP/1.1 - -\n")
        XCTAssertEqual(format("/x", cache: "Cache-Status: larder; hit; ttl=5\r\n", json: false), format("/x", json: false),
                       "a hit's whole field line is cut to the column")
        XCTAssertEqual(format("/x", cache: "larder; hit; ttl=5", json: true), format("/x", json: true))
    }

    /// The word-at-a-time check says what the byte rule says, for every
    /// byte at every place in texts of every length up to three words.
    func testTheWordCheckAgreesWithTheByteRule() {
        func plain(_ byte: UInt8) -> Bool { byte >= 0x20 && byte < 0x7F && byte != 0x22 && byte != 0x5C }
        for length in 1...24 {
            var text = [UInt8](repeating: UInt8(ascii: "a"), count: length)
            for place in 0..<length {
                for byte in UInt8.min...UInt8.max {
                    text[place] = byte
                    let verdict = text.withUnsafeBufferPointer { ByteWriting.isPlain($0) }
                    XCTAssertEqual(verdict, plain(byte), "byte \(byte) at \(place) of \(length)")
                }
                text[place] = UInt8(ascii: "a")
            }
        }
        XCTAssertTrue([UInt8]().withUnsafeBufferPointer { ByteWriting.isPlain($0) })
    }

    func testCopiesOfEveryLength() {
        for length in 0...130 {
            let text = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            var out = [UInt8](repeating: 0xEE, count: length + 8)
            let written = out.withUnsafeMutableBufferPointer { buffer in
                var p = buffer.baseAddress!
                text.withUnsafeBufferPointer { ByteWriting.put($0, at: &p) }
                return p - buffer.baseAddress!
            }
            XCTAssertEqual(written, length)
            XCTAssertEqual(Array(out[..<length]), text, "length \(length)")
            XCTAssertEqual(Array(out[length...]), [UInt8](repeating: 0xEE, count: 8), "nothing past the end, length \(length)")
        }
    }

    func testDecimals() {
        for value in [0, 7, 10, 99, 100, 999, 1000, 1024, 9999, 10_000, 65_535, 123_456_789, Int.max] {
            var out = [UInt8](repeating: 0, count: 24)
            let written = out.withUnsafeMutableBufferPointer { buffer in
                var p = buffer.baseAddress!
                ByteWriting.putDecimal(value, at: &p)
                return p - buffer.baseAddress!
            }
            XCTAssertEqual(String(decoding: out[..<written], as: UTF8.self), String(value))
        }
    }

    /// A line packed by a worker reads back whole (texts of every length, empty ones too).
    func testAPackedLineReadsBackWhole() {
        let buffer = ByteBuffer(capacity: 64)
        let targets = ["/", "/" + String(repeating: "é", count: 3000), ""]
        for (i, target) in targets.enumerated() {
            let figures = AccessLine.Figures(time: Int64(i), worker: i, status: 200 + i, bodyBytes: i, firstByteMicroseconds: nil,
                                             totalMicroseconds: i, result: .miss, upstreamStatus: 200, upstreamMicroseconds: nil)
            AccessLine.with(figures, client: "c\(i)", method: "GET", target: target, cache: []) { PackedLines.append($0, to: buffer) }
        }
        var read: [(String, String, Int, Int64, Int?)] = []
        PackedLines.forEach(in: buffer.bytes) { line in
            read.append((String(decoding: line.client, as: UTF8.self), String(decoding: line.target, as: UTF8.self),
                         line.figures.status, line.figures.time, line.figures.firstByteMicroseconds))
        }
        XCTAssertEqual(read.map(\.1), targets)
        XCTAssertEqual(read.map(\.0), ["c0", "c1", "c2"])
        XCTAssertEqual(read.map(\.2), [200, 201, 202])
        XCTAssertEqual(read.map(\.3), [0, 1, 2])
        XCTAssertEqual(read.map(\.4), [nil, nil, nil])
    }
}
