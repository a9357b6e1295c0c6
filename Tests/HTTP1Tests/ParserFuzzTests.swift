import XCTest
@testable import HTTP1

/// Mutation fuzzing in the test suite: seeded, bounded, repeatable. Every
/// mutated input must parse to the same result whole and split at a random
/// point, never crash, and a complete result must never consume more than
/// was given.
final class ParserFuzzTests: XCTestCase {
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let seeds = [
        "GET /a?b=c HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
        "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
        "PUT /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "GET http://h/x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    ]
    static let interesting: [UInt8] = Array("\r\n :\t\0\u{7f},;=\"chunked0123456789-HTTP/1.".utf8) + [0xFF, 0x80]

    func testMutatedRequestsNeverCrashAndSplitConsistently() {
        var rng = SplitMix(state: 0x1A2B_3C4D)
        let limits = ParseLimits(maxTargetBytes: 64, maxHeaderBytes: 256, maxHeaderCount: 8, maxBodyBytes: 1000)
        for iteration in 0..<20_000 {
            var bytes = Array(Self.seeds[iteration % Self.seeds.count].utf8)
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let at = Int.random(in: 0..<max(1, bytes.count), using: &rng)
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: bytes[min(at, bytes.count - 1)] = Self.interesting.randomElement(using: &rng)!
                case 1: bytes.insert(Self.interesting.randomElement(using: &rng)!, at: at)
                case 2: if bytes.count > 1 { bytes.remove(at: min(at, bytes.count - 1)) }
                default: bytes.insert(contentsOf: bytes[at...].prefix(Int.random(in: 1...40, using: &rng)), at: at)
                }
            }
            var whole = RequestParser(limits: limits)
            let expected = bytes.withUnsafeBytes { whole.parse($0) }
            if case .complete(_, let consumed) = expected { XCTAssertLessThanOrEqual(consumed, bytes.count) }

            let split = Int.random(in: 0...bytes.count, using: &rng)
            var parts = RequestParser(limits: limits)
            var result = bytes.withUnsafeBytes { parts.parse(UnsafeRawBufferPointer(rebasing: $0[0..<split])) }
            if case .incomplete = result {
                result = bytes.withUnsafeBytes { parts.parse($0) }
            }
            XCTAssertEqual(result, expected, "input: \(String(decoding: bytes, as: UTF8.self).debugDescription)")
        }
    }

    func testChunkedDecoderOnRandomSplitsAndGarbage() {
        var rng = SplitMix(state: 42)
        for _ in 0..<5_000 {
            // A valid body with random chunk sizes, maybe corrupted at one byte.
            var payload: [UInt8] = []
            var encoded: [UInt8] = []
            for _ in 0..<Int.random(in: 0...5, using: &rng) {
                let n = Int.random(in: 1...40, using: &rng)
                let piece = (0..<n).map { _ in UInt8.random(in: 0x61...0x7A, using: &rng) }
                payload += piece
                encoded += Array(String(n, radix: 16).utf8) + [13, 10] + piece + [13, 10]
            }
            encoded += Array("0\r\n\r\n".utf8)
            let corrupt = Bool.random(using: &rng)
            if corrupt { encoded[Int.random(in: 0..<encoded.count, using: &rng)] = Self.interesting.randomElement(using: &rng)! }

            var decoder = ChunkedDecoder(maxBodyBytes: 10_000)
            var body: [UInt8] = []
            var outcome: ChunkedDecoder.Outcome = .needMore
            var offset = 0
            while offset < encoded.count {
                let end = min(encoded.count, offset + Int.random(in: 1...16, using: &rng))
                outcome = encoded.withUnsafeBytes { decoder.decode(UnsafeRawBufferPointer(rebasing: $0[offset..<end])) { body += $0 } }
                if case .needMore = outcome { offset = end; continue }
                break
            }
            if !corrupt {
                XCTAssertEqual(body, payload)
                if case .done = outcome {} else { XCTFail("valid body not done: \(outcome)") }
            }
            XCTAssertLessThanOrEqual(body.count, 10_000)
        }
    }
}
