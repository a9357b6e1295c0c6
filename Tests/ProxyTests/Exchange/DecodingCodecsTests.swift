import CacheSemantics
import CacheStorage
import Compression
import HTTP1
import HTTPHeaders
import XCTest
@testable import Proxy

/// Stored zstd and brotli bodies decoded for clients that do not take
/// them, as gzip ones are: the decoded length a zstd frame declares, or
/// measured once (brotli says none), and the body piece by piece.
final class DecodingCodecsTests: XCTestCase {
    private let plain = Array(String(repeating: "{\"id\": 7, \"name\": \"larder\", \"ok\": true},\n", count: 12_000).utf8)

    private func entry(_ body: [UInt8], coding: Codec, key: String = "/c") -> CachedResponse {
        let builder = StoredResponseBuilder(shared: true, targetedField: "x")
        return body.withUnsafeBytes {
            builder.build(key: key, status: 200, reason: nil,
                          headers: ["cache-control": "max-age=60", "content-encoding": coding.token], body: $0,
                          timing: ResponseTiming(requestTime: 100, responseTime: 100, dateValue: 100, ageValue: 0), tags: [],
                          varyFrom: { _ in nil })
        }
    }

    private func reader(_ entry: CachedResponse) -> StoredBodyReader { entry.storedBody.reader()! }

    private func decodeAll(_ body: DecodingBody) -> (bytes: [UInt8], step: DecodingBody.Step) {
        var out: [UInt8] = []
        for _ in 0..<100_000 {
            let step = body.pump(budget: DecodingBody.turnBytes) { out += $0; return true }
            if step != .more { return (out, step) }
        }
        return (out, .more)
    }

    func testTheCodingIsReadFromTheStoredHead() throws {
        XCTAssertEqual(entry([1], coding: .zstd).coding, .zstd)
        XCTAssertEqual(entry([1], coding: .br).coding, .br)
        var parser = RequestParser()
        guard case .complete(let request, _) = Array("GET / HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip, br\r\n\r\n".utf8)
            .withUnsafeBytes({ parser.parse($0) }) else { return XCTFail("unparsed") }
        XCTAssertTrue(ClientCoding.mustDecode(entry([1], coding: .zstd), for: request), "gzip and br taken, zstd not")
        XCTAssertFalse(ClientCoding.mustDecode(entry([1], coding: .br), for: request))
    }

    func testAZstdFrameDeclaresItsLengthAndDecodesInBoundedPieces() throws {
        let stored = entry(plain.withUnsafeBytes { Zstd.compress($0) }, coding: .zstd)
        XCTAssertEqual(ClientCoding.declaredLength(of: stored, reading: reader(stored), cachedOnly: true), .length(plain.count),
                       "from the frame header, on the loop")
        let body = try XCTUnwrap(DecodingBody(stored, reader: reader(stored), length: plain.count, wanted: 0..<plain.count))
        XCTAssertTrue(body.prime())
        let (bytes, step) = decodeAll(body)
        XCTAssertEqual(step, .ended)
        XCTAssertEqual(bytes, plain)
    }

    func testABrotliBodysLengthIsMeasuredOnceOffTheLoop() throws {
        let stored = entry(plain.withUnsafeBytes { Brotli.compress($0) }, coding: .br, key: "/br-\(UInt64.random(in: 0...UInt64.max))")
        XCTAssertEqual(ClientCoding.declaredLength(of: stored, reading: reader(stored), cachedOnly: true), .cold,
                       "nothing declares it: measured where reading may wait")
        XCTAssertEqual(ClientCoding.declaredLength(of: stored, reading: reader(stored)), .length(plain.count))
        XCTAssertEqual(ClientCoding.declaredLength(of: stored, reading: reader(stored), cachedOnly: true), .length(plain.count),
                       "then known on the loop")
        let body = try XCTUnwrap(DecodingBody(stored, reader: reader(stored), length: plain.count, wanted: 0..<plain.count))
        XCTAssertTrue(body.prime())
        body.want(1000..<1010)
        let (bytes, step) = decodeAll(body)
        XCTAssertEqual(step, .ended)
        XCTAssertEqual(bytes, Array(plain[1000..<1010]), "a range of the decoded representation")
    }

    func testCorruptBodiesAndBombsAreNotDecoded() throws {
        for codec in [Codec.zstd, .br] {
            var corrupt = plain.withUnsafeBytes { codec.compress($0) }
            corrupt[corrupt.count / 2] ^= 0xFF
            let broken = entry(corrupt, coding: codec, key: "/corrupt-\(codec.token)-\(UInt64.random(in: 0...UInt64.max))")
            let length = ClientCoding.declaredLength(of: broken, reading: reader(broken))
            if case .length(let n) = length {
                // (zstd: the frame still declares its size; the body fails as it decodes.)
                let body = try XCTUnwrap(DecodingBody(broken, reader: reader(broken), length: n, wanted: 0..<n))
                if body.prime() { guard case .failed = decodeAll(body).step else { return XCTFail("\(codec): corrupt") } }
            } else {
                XCTAssertEqual(length, .none, "\(codec)")
            }
            let notCoded = entry(Array("not compressed at all".utf8), coding: codec, key: "/plain-\(codec.token)-\(UInt64.random(in: 0...UInt64.max))")
            XCTAssertEqual(ClientCoding.declaredLength(of: notCoded, reading: reader(notCoded)), .none, "\(codec)")
        }
        // 64 MiB of zeros in a few KiB: more than 64 times its size and over 16 MiB.
        let bomb = [UInt8](repeating: 0, count: 64 << 20).withUnsafeBytes { Brotli.compress($0) }
        XCTAssertLessThan(bomb.count * 64, 16 << 20)
        let stored = entry(bomb, coding: .br, key: "/bomb-\(UInt64.random(in: 0...UInt64.max))")
        XCTAssertEqual(ClientCoding.declaredLength(of: stored, reading: reader(stored)), .none, "not measured past the limit")
    }
}
