import HTTPHeaders
import Telemetry
import XCTest
@testable import Proxy

/// request_buffer_size: which bodies are held until complete, and when the
/// transfer starts.
final class HeldRequestBodyTests: XCTestCase {
    private let fields: HeaderFields = ["content-type": "text/plain"]

    private func append(_ text: String, to body: inout HeldRequestBody) -> HeldRequestBody.Piece {
        Array(text.utf8).withUnsafeBytes { body.append($0) }
    }

    func testASmallBodyIsHeldUntilCompleteThenSentWithItsLength() {
        var body = HeldRequestBody(framing: .contentLength(5), limit: 16)
        XCTAssertEqual(body.forward(fields: fields), .wait)
        XCTAssertEqual(append("hel", to: &body), .held)
        XCTAssertEqual(append("lo", to: &body), .held)
        XCTAssertTrue(body.end(), "the request goes upstream now")
        XCTAssertEqual(body.forward(fields: fields), .start(.streamed(length: 5)))
        let started = body.transferStarted()
        XCTAssertEqual(started.map { String(decoding: $0.held, as: UTF8.self) }, "hello")
        XCTAssertEqual(started?.complete, true)
        XCTAssertEqual(append("x", to: &body), .supply, "nothing is held after the hand-over")
    }

    func testABodyOverTheLimitStreamsAtOnce() {
        var body = HeldRequestBody(framing: .contentLength(17), limit: 16)
        XCTAssertEqual(body.forward(fields: fields), .start(.streamed(length: 17)))
        XCTAssertNil(body.transferStarted())
        XCTAssertEqual(append("abc", to: &body), .supply)
        XCTAssertFalse(body.end(), "the transfer finishes the body itself")
    }

    func testAChunkedBodyIsHeldUntilItOutgrowsTheLimit() {
        var body = HeldRequestBody(framing: .chunked, limit: 4)
        XCTAssertEqual(body.forward(fields: fields), .wait)
        XCTAssertEqual(append("abc", to: &body), .held)
        XCTAssertEqual(append("de", to: &body), .startStreaming(fields), "the kept fields go with it")
        let started = body.transferStarted()
        XCTAssertEqual(started.map { String(decoding: $0.held, as: UTF8.self) }, "abcde")
        XCTAssertEqual(started?.complete, false, "more is to come")
        XCTAssertEqual(append("f", to: &body), .supply)
        XCTAssertFalse(body.end())
    }

    func testAChunkedBodyWithinTheLimitGoesWithItsLength() {
        var body = HeldRequestBody(framing: .chunked, limit: 64)
        XCTAssertEqual(body.forward(fields: fields), .wait)
        XCTAssertEqual(append("abc", to: &body), .held)
        XCTAssertTrue(body.end())
        XCTAssertEqual(body.forward(fields: fields), .start(.streamed(length: 3)))
    }

    func testHoldingOffStreamsEveryBody() {
        var body = HeldRequestBody(framing: .chunked, limit: 0)
        XCTAssertEqual(body.forward(fields: fields), .start(.streamed(length: nil)))
        XCTAssertEqual(append("abc", to: &body), .supply)
    }

    func testNoBodyGoesWithoutOne() {
        var body = HeldRequestBody(framing: .none, limit: 64)
        XCTAssertEqual(body.forward(fields: fields), .start(.none))
        XCTAssertNil(body.transferStarted())
        XCTAssertFalse(body.end())
    }

    func testPiecesBeforeTheRequestGoesUpstreamAreNotHeld() {
        // An exchange answered before forwarding (a bad policy name) holds nothing.
        var body = HeldRequestBody(framing: .contentLength(3), limit: 64)
        XCTAssertEqual(append("abc", to: &body), .supply)
        XCTAssertFalse(body.end(), "never forwarded by the body's end")
    }

    func testARetryAfterTheHandOverStreamsAgain() {
        var body = HeldRequestBody(framing: .contentLength(3), limit: 64)
        _ = body.forward(fields: fields)
        _ = append("abc", to: &body)
        _ = body.end()
        _ = body.forward(fields: fields)
        _ = body.transferStarted()
        XCTAssertEqual(body.forward(fields: fields), .start(.streamed(length: 3)), "not held a second time")
    }

    /// Every body held counts against one total; beyond it a body that
    /// would be held streams, and its share comes back when it goes.
    func testHeldBodiesShareOneTotal() {
        let stats = ProxyStats()
        let fields: HeaderFields = ["host": "a"]
        var first = HeldRequestBody(framing: .contentLength(600), limit: 1000, reservation: HeldBodyReservation(stats: stats, limit: 1000))
        XCTAssertEqual(first.forward(fields: fields), .wait)
        var second = HeldRequestBody(framing: .contentLength(600), limit: 1000, reservation: HeldBodyReservation(stats: stats, limit: 1000))
        XCTAssertTrue(second.streamedForTotal)
        XCTAssertEqual(second.forward(fields: fields), .start(.streamed(length: 600)))
        XCTAssertEqual(stats.heldBodyBytes.load(ordering: .relaxed), 600)
        var chunked = HeldRequestBody(framing: .chunked, limit: 1000, reservation: HeldBodyReservation(stats: stats, limit: 1000))
        XCTAssertEqual(chunked.forward(fields: fields), .wait)
        XCTAssertEqual([UInt8](repeating: 1, count: 300).withUnsafeBytes { chunked.append($0) }, .held)
        XCTAssertEqual([UInt8](repeating: 1, count: 300).withUnsafeBytes { chunked.append($0) }, .startStreaming(fields))
        XCTAssertTrue(chunked.streamedForTotal)
        XCTAssertEqual(chunked.transferStarted()?.held.count, 600, "what was held goes first")
        _ = first.transferStarted()
        XCTAssertEqual(stats.heldBodyBytes.load(ordering: .relaxed), 0, "given back")
    }
}
