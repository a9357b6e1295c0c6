import EventLoop
import Fleet
import Redis
import XCTest

/// What Sentinel says, read as values, and the master every connection of
/// a node follows (`RedisMaster`): generations, watchers, failovers and the
/// time without a master.
final class SentinelTests: XCTestCase {
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    func testTheMastersAddressFromASentinelsReply() {
        XCTAssertEqual(Sentinel.masterAddress(.array([.string(bytes("10.0.0.6")), .string(bytes("6380"))])),
                       RedisAddress(endpoint: .tcp(host: "10.0.0.6", port: 6380)))
        XCTAssertEqual(Sentinel.masterAddress(.array([.string(bytes("::1")), .string(bytes("6379"))])),
                       RedisAddress(endpoint: .tcp(host: "::1", port: 6379)))
        for unknown: RedisReply in [.null, .array([]), .error("ERR No such master with that name"),
                                    .array([.string(bytes("10.0.0.6"))]), .array([.string(bytes("10.0.0.6")), .string(bytes("0"))]),
                                    .array([.string(bytes("")), .string(bytes("6379"))]),
                                    .array([.string(bytes("10.0.0.6")), .string(bytes("port"))])] {
            XCTAssertNil(Sentinel.masterAddress(unknown), "\(unknown)")
        }
    }

    func testAFailoverAnnouncementForThisMasterOnly() {
        XCTAssertEqual(Sentinel.switched(bytes("cache 10.0.0.5 6379 10.0.0.6 6380"), master: "cache"),
                       RedisAddress(endpoint: .tcp(host: "10.0.0.6", port: 6380)))
        XCTAssertNil(Sentinel.switched(bytes("other 10.0.0.5 6379 10.0.0.6 6380"), master: "cache"))
        XCTAssertNil(Sentinel.switched(bytes("cache 10.0.0.5 6379 10.0.0.6"), master: "cache"))
        XCTAssertNil(Sentinel.switched(bytes("cache 10.0.0.5 6379 10.0.0.6 99999"), master: "cache"))
        XCTAssertNil(Sentinel.switched([], master: "cache"))
        let alphabet = bytes("cache 10.6:9 ") + [0, 0xFF]
        for _ in 0..<2000 {
            let random = (0..<Int.random(in: 0...40)).map { _ in alphabet.randomElement()! }
            if let address = Sentinel.switched(random, master: "cache"), case .tcp(_, let port) = address.endpoint {
                XCTAssertTrue((1...65535).contains(port))
            }
        }
    }

    func testAFixedMasterNeverMoves() {
        let address = RedisAddress(endpoint: .tcp(host: "127.0.0.1", port: 6379))
        let master = RedisMaster(fixed: address)
        var asked = 0
        master.onDoubt { _ in asked += 1 }
        master.doubt(0)
        XCTAssertEqual(asked, 0, "nothing to ask")
        XCTAssertEqual(master.current?.address, address)
        XCTAssertEqual(master.current?.generation, 0)
        XCTAssertFalse(master.followsSentinel)
    }

    func testEachNewAddressIsAGenerationAndEveryWatcherHearsOfIt() throws {
        let loop = try EventLoop()
        let master = RedisMaster(followingSentinelAt: 1_000)
        XCTAssertNil(master.current, "none until a sentinel names one")
        var heard: [UInt64?] = []
        master.watch(on: loop) { heard.append(master.current?.generation) }
        let first = RedisAddress(endpoint: .tcp(host: "10.0.0.5", port: 6379))
        let second = RedisAddress(endpoint: .tcp(host: "10.0.0.6", port: 6379))
        master.set(first, now: 1_000)
        master.set(first, now: 1_100)  // the same again: nothing
        for _ in 0..<3 { loop.runOnce(maxWaitMilliseconds: 0) }
        XCTAssertEqual(heard, [1])
        XCTAssertEqual(master.figures(now: 1_000).failovers, 0, "the first master is no failover")

        // A doubt about an older generation is ignored; about the current one it asks.
        var doubted: [UInt64] = []
        master.onDoubt { doubted.append($0) }
        master.doubt(7)
        master.doubt(1)
        XCTAssertEqual(doubted, [1])

        master.reached(true, now: 1_500)
        master.reached(false, now: 2_000)
        master.set(second, now: 2_100)
        master.reached(true, now: 3_200)
        for _ in 0..<3 { loop.runOnce(maxWaitMilliseconds: 0) }
        XCTAssertEqual(heard, [1, 2])
        let figures = master.figures(now: 4_000)
        XCTAssertEqual(figures.failovers, 1)
        XCTAssertEqual(figures.withoutMasterMilliseconds, 500 + 1_200, "from start to the first, and the failover")
        master.reached(false, now: 5_000)
        XCTAssertEqual(master.figures(now: 5_300).withoutMasterMilliseconds, 1_700 + 300, "still without one")
    }
}
