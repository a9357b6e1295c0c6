import XCTest
@testable import Telemetry

/// One worker's latency buckets, and their sum over workers.
final class LatencyHistogramsTests: XCTestCase {
    func testAnObservationGoesToTheFirstBucketThatHoldsIt() {
        let h = LatencyHistograms()
        for micros in [0, 100, 101, 999_999, 1_000_000, 10_000_000, 10_000_001, 60_000_000] {
            h.record(.totalHit, microseconds: micros)
        }
        let s = h.snapshot(.totalHit)
        XCTAssertEqual(s.buckets.count, LatencyHistograms.boundsMicroseconds.count + 1)
        XCTAssertEqual(s.buckets[0], 2, "0 and 100 µs: le 0.0001")
        XCTAssertEqual(s.buckets[1], 1, "101 µs: le 0.00025")
        XCTAssertEqual(s.buckets[12], 2, "999,999 and 1,000,000 µs: le 1")
        XCTAssertEqual(s.buckets[15], 1, "10 s: le 10")
        XCTAssertEqual(s.buckets[16], 2, "beyond 10 s: +Inf only")
        XCTAssertEqual(s.count, 8)
        XCTAssertEqual(s.sumMicroseconds, 0 + 100 + 101 + 999_999 + 1_000_000 + 10_000_000 + 10_000_001 + 60_000_000)
        XCTAssertEqual(h.snapshot(.totalMiss).count, 0, "series are apart")
    }

    func testTheBucketComparisonsAgreeWithTheBounds() {
        let bounds = LatencyHistograms.boundsMicroseconds
        XCTAssertEqual(LatencyHistograms.stride, bounds.count + 2)
        for us in [-5, 0, 1, 99, 100, 101] + bounds.flatMap({ [$0 - 1, $0, $0 + 1] }) + [Int.max] {
            let expected = bounds.firstIndex { us <= $0 } ?? bounds.count
            XCTAssertEqual(LatencyHistograms.bucket(us), expected, "\(us) µs")
        }
    }

    func testAnAnswerRecordsItsFirstByteAndItsTotal() {
        let h = LatencyHistograms()
        h.record(.miss, firstByte: 300, total: 30_000)
        h.record(.hit, firstByte: 50, total: 50)
        XCTAssertEqual(h.snapshot(.firstByteMiss).buckets[2], 1)
        XCTAssertEqual(h.snapshot(.totalMiss).buckets[8], 1)
        XCTAssertEqual(h.snapshot(.totalMiss).sumMicroseconds, 30_000)
        XCTAssertEqual(h.snapshot(.firstByteHit).buckets[0], 1)
        XCTAssertEqual(h.snapshot(.totalHit).count, 1)
        XCTAssertEqual(h.snapshot(.totalPass).count, 0)
    }

    func testWorkersAreSummed() {
        let stats = ProxyStats()
        let a = stats.makeWorkerStats(), b = stats.makeWorkerStats()
        a.latency.record(.upstreamHead, microseconds: 2_000)
        b.latency.record(.upstreamHead, microseconds: 3_000)
        b.latency.record(.firstByte(.pass), microseconds: 50)
        XCTAssertEqual(stats.latency(.upstreamHead).count, 2)
        XCTAssertEqual(stats.latency(.upstreamHead).sumMicroseconds, 5_000)
        XCTAssertEqual(stats.latency(.firstBytePass).buckets[0], 1)
        XCTAssertEqual(LatencyHistograms.Series.total(.other), .totalOther)
    }
}

/// The log's followers: a worker's queue is bounded, what overflows is
/// counted, and the workers' lines come out merged in time order.
final class LogFeedTests: XCTestCase {
    private func push(_ target: String, time: Int64, to queue: LineQueue) {
        let figures = AccessLine.Figures(time: time, worker: 0, status: 200, bodyBytes: 0, firstByteMicroseconds: 1,
                                         totalMicroseconds: 2, result: .hit)
        _ = AccessLine.with(figures, client: "c", method: "GET", target: target, cache: []) { queue.push($0) }
    }

    private func drain(_ feed: LogFeed) -> (targets: [String], dropped: Int) {
        var targets: [String] = [], dropped = -1
        feed.drain { lost, lines in
            dropped = lost
            lines.forEach { targets.append(String(decoding: $0.target, as: UTF8.self)) }
        }
        return (targets, dropped)
    }

    func testAQueueKeepsItsCapacityAndCountsTheRest() {
        let feed = LogFeed()
        XCTAssertFalse(feed.isFollowed)
        feed.follow()
        XCTAssertTrue(feed.isFollowed)
        let a = feed.makeQueue(), b = feed.makeQueue()
        let target = String(repeating: "a", count: 1000)
        var pushed = 0
        while pushed * 1000 < LogFeed.capacityBytes + 5000 {
            push(target, time: 2, to: a)
            pushed += 1
            if pushed % 100 == 0 { a.batchEnded() }  // a worker's loop hands its lines over after each batch
        }
        a.batchEnded()
        push("/b", time: 1, to: b)
        push("/c", time: 3, to: b)
        b.batchEnded()
        let (targets, dropped) = drain(feed)
        XCTAssertGreaterThan(dropped, 0, "past its capacity a queue drops")
        XCTAssertEqual(targets.count + dropped, pushed + 2, "every line is delivered or counted")
        XCTAssertEqual(targets.first, "/b", "in time order")
        XCTAssertEqual(targets.last, "/c", "in time order")
        XCTAssertEqual(drain(feed).targets.count, 0, "taken once")
        XCTAssertEqual(drain(feed).dropped, 0, "counted once")
        push("/d", time: 4, to: a)
        XCTAssertEqual(drain(feed).targets, [], "nothing is seen before its batch ends")
        a.batchEnded()
        XCTAssertEqual(drain(feed).targets, ["/d"], "a queue takes lines again once drained")
        feed.unfollow()
        XCTAssertFalse(feed.isFollowed)
    }
}

/// Which answers a worker hands the admin thread (`RequestSampler`).
final class RequestSamplerTests: XCTestCase {
    func testOneHitInTheStrideAndEveryMissPassAndError() {
        let samples = RequestSamples()
        var sampler = RequestSampler(samples.makeQueue())
        let hitWeights = (0..<(3 * RequestSamples.hitStride)).compactMap { _ in sampler.weight(.hit, status: 200) }
        XCTAssertEqual(hitWeights, Array(repeating: RequestSamples.hitStride, count: 3), "a hit stands for its stride")
        XCTAssertEqual(sampler.weight(.miss, status: 200), 1)
        XCTAssertEqual(sampler.weight(.pass, status: 404), 1)
        XCTAssertEqual(sampler.weight(.other, status: 502), 1)
        XCTAssertEqual(sampler.weight(.hit, status: 503), 1, "every error, even a stored one")
        var off = RequestSampler(nil)
        XCTAssertNil(off.weight(.miss, status: 200), "nothing without a queue")
    }

    func testAWorkersQueueIsBounded() {
        let samples = RequestSamples()
        let queue = samples.makeQueue()
        for i in 0..<(RequestSamples.capacity + 7) {
            queue.push(RequestSample(time: 1, method: "GET", target: "/\(i)", status: 200, result: .miss, weight: 1))
        }
        let (taken, dropped) = samples.drain()
        XCTAssertEqual(taken.count, RequestSamples.capacity)
        XCTAssertEqual(dropped, 7)
        XCTAssertTrue(samples.drain().samples.isEmpty)
    }
}
