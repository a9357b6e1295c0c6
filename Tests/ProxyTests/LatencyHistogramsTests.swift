import XCTest
@testable import Proxy

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

/// The log's followers: a worker's queue is bounded, what overflows is counted.
final class LogFeedTests: XCTestCase {
    private func line(_ target: String) -> AccessLine {
        AccessLine(client: "c", method: "GET", target: target, status: 200, bodyBytes: 0, firstByteMicroseconds: 1,
                   totalMicroseconds: 2, result: .hit, cache: "-", upstreamStatus: nil, upstreamMicroseconds: nil)
    }

    func testAQueueKeepsItsCapacityAndCountsTheRest() {
        let feed = LogFeed()
        XCTAssertFalse(feed.isFollowed)
        feed.follow()
        XCTAssertTrue(feed.isFollowed)
        let a = feed.makeQueue(), b = feed.makeQueue()
        for i in 0..<(LogFeed.capacity + 5) { a.push(LogEntry(line: line("/a\(i)"), time: 2, worker: 0)) }
        b.push(LogEntry(line: line("/b"), time: 1, worker: 1))
        let (entries, dropped) = feed.drain()
        XCTAssertEqual(entries.count, LogFeed.capacity + 1)
        XCTAssertEqual(dropped, 5)
        XCTAssertEqual(entries.first?.line.target, "/b", "in time order")
        XCTAssertEqual(feed.drain().entries.count, 0, "taken once")
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
