import Foundation
import XCTest

/// Partial content end to end (RFC 9111 sections 3.3 and 3.4; the
/// cache-tests' partial-store-* tests): a 206 the upstream sent is stored
/// as a piece, answers the ranges it holds, and joins the other pieces of
/// the same representation into the whole.
final class PartialContentEndToEndTests: ProxyTestCase {
    private func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }

    /// Asks (bounded) with a cache-only policy until `target` is stored
    /// whole: the background fetch that follows a range miss has landed.
    private func waitUntilStoredWhole(_ target: String, on l: LarderProcess) throws -> Bool {
        let c = try l.client()
        for _ in 0..<200 {
            let r = try c.get(target, headers: ["Larder-Cache-Policy: returnCacheDataDontLoad"])
            if r.status == 200 { return true }
            usleep(20_000)
        }
        return false
    }

    /// A range miss: the client gets its range at once (the upstream is
    /// asked for that range), the whole follows in the background, and
    /// every later range is a hit.
    func testARangeMissIsAnsweredAtOnceAndTheWholeFetchedForLaterRanges() throws {
        let target = "/part/a?size=100000&etag=p1&ranges=1"
        let c = try larder.client()
        let first = try c.get(target, headers: ["Range: bytes=-5"])
        XCTAssertEqual(first.status, 206)
        XCTAssertEqual(first.header("content-range"), "bytes 99995-99999/100000")
        XCTAssertEqual(first.body.count, 5)
        XCTAssertEqual(try waitForOriginCount(target, atLeast: 2), 2, "the range, then the whole")
        XCTAssertTrue(try waitUntilStoredWhole(target, on: larder))
        XCTAssertNil(try originHeaders(target)["range"], "the whole was asked for")
        let whole = try c.get(target).body
        XCTAssertEqual(whole.count, 100000)
        XCTAssertEqual(first.body, Array(whole[99995...]))
        for (range, expected) in [("bytes=0-9", 0...9), ("bytes=50000-50099", 50000...50099), ("bytes=-1", 99999...99999)] {
            let part = try c.get(target, headers: ["Range: \(range)"])
            XCTAssertTrue(isHit(part), range)
            XCTAssertEqual(part.status, 206, range)
            XCTAssertEqual(part.body, Array(whole[expected]), range)
        }
        XCTAssertEqual(try origin.count(target), 2)
        XCTAssertEqual(try stat("range_fills"), 1)
    }

    private func stat(_ name: String) throws -> Int? {
        let r = try larder.adminClient().get("/stats")
        return (try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])?[name] as? Int
    }

    /// With range_fill = false only the ranges asked for are fetched: a
    /// stored piece answers the ranges it holds.
    func testAStoredPieceAnswersTheRangesItHolds() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/part/b?size=100&etag=p1&ranges=1"
        let c = try larder.client()
        let first = try c.get(target, headers: ["Range: bytes=-5"])
        XCTAssertEqual(first.status, 206)
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        XCTAssertTrue(pairs.contains(["range", "bytes=-5"]), "the client's range goes upstream")
        XCTAssertEqual(first.header("content-range"), "bytes 95-99/100")
        let tail = first.body
        for (range, expected, contentRange) in [("bytes=-5", 0...4, "bytes 95-99/100"), ("bytes=96-98", 1...3, "bytes 96-98/100"),
                                                ("bytes=97-", 2...4, "bytes 97-99/100"), ("bytes=-1", 4...4, "bytes 99-99/100")] {
            let again = try c.get(target, headers: ["Range: \(range)"])
            XCTAssertTrue(isHit(again), range)
            XCTAssertEqual(again.status, 206, range)
            XCTAssertEqual(again.header("content-range"), contentRange, range)
            XCTAssertEqual(again.header("content-length"), String(expected.count), range)
            XCTAssertEqual(again.body, Array(tail[expected]), range)
        }
        let beyond = try c.get(target, headers: ["Range: bytes=200-"])
        XCTAssertEqual(beyond.status, 416)
        XCTAssertEqual(beyond.header("content-range"), "bytes */100")
        XCTAssertEqual(try origin.count(target), 1, "all of them from the piece")

        // What the piece does not hold goes upstream; so does a request for the whole.
        XCTAssertFalse(isHit(try c.get(target, headers: ["Range: bytes=0-9"])))
        XCTAssertEqual(try origin.count(target), 2)
        let full = try c.get(target)
        XCTAssertEqual(full.status, 200)
        XCTAssertFalse(isHit(full))
        XCTAssertEqual(Array(full.body[95...]), tail)
        XCTAssertEqual(try origin.count(target), 3)
        XCTAssertTrue(isHit(try c.get(target)), "the whole response replaced the piece")
        XCTAssertTrue(isHit(try c.get(target, headers: ["Range: bytes=0-1"])))
    }

    func testPiecesOfOneRepresentationJoinIntoTheWhole() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/part/c?size=100&etag=j1&ranges=1"
        let whole = try larder.client().get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        let c = try larder.client()
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=0-39"]).status, 206)
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=30-69"]).status, 206)
        let joined = try c.get(target, headers: ["Range: bytes=10-59"])
        XCTAssertTrue(isHit(joined), "bytes 0-69 held as one piece")
        XCTAssertEqual(joined.body, Array(whole[10...59]))
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=70-"]).status, 206)
        XCTAssertEqual(try origin.count(target), 3)
        let complete = try c.get(target)
        XCTAssertTrue(isHit(complete), "the pieces made up the whole")
        XCTAssertEqual(complete.status, 200)
        XCTAssertNil(complete.header("content-range"))
        XCTAssertEqual(complete.header("content-length"), "100")
        XCTAssertEqual(complete.body, whole)
        XCTAssertEqual(try origin.count(target), 3)
    }

    /// A player's seeks: pieces apart from each other are kept side by
    /// side (each later range inside one is a hit), and a range that
    /// bridges them joins them all into the whole.
    func testPiecesApartAreKeptSideBySideAndABridgeJoinsThem() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/part/seek?size=100&etag=s1&ranges=1"
        let whole = try larder.client().get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        let c = try larder.client()
        for range in ["0-9", "50-59", "80-89"] { XCTAssertEqual(try c.get(target, headers: ["Range: bytes=\(range)"]).status, 206) }
        for (range, bytes) in [("2-7", whole[2...7]), ("50-59", whole[50...59]), ("85-89", whole[85...89]), ("0-0", whole[0...0])] {
            let r = try c.get(target, headers: ["Range: bytes=\(range)"])
            XCTAssertTrue(isHit(r), "\(range): every piece kept")
            XCTAssertEqual(r.body, Array(bytes), range)
        }
        XCTAssertEqual(try origin.count(target), 3)
        // 10-49 touches 0-9 and 50-59; 60-79 then bridges to 80-89; 90- ends it.
        for range in ["10-49", "60-79", "90-"] { XCTAssertEqual(try c.get(target, headers: ["Range: bytes=\(range)"]).status, 206) }
        let complete = try c.get(target)
        XCTAssertTrue(isHit(complete), "joined into the whole")
        XCTAssertEqual(complete.status, 200)
        XCTAssertEqual(complete.body, whole)
        XCTAssertEqual(try origin.count(target), 6)
    }

    /// Without a strong validator two pieces may be of different bytes:
    /// the later one replaces the earlier.
    func testPiecesWithoutAStrongValidatorDoNotJoin() throws {
        let (_, larder) = try start(config: "range_fill = false\n")
        for target in ["/part/d?size=50&ranges=1", "/part/e?size=50&ranges=1&extra=ETag:W/%22w%22"] {
            let c = try larder.client()
            _ = try c.get(target, headers: ["Range: bytes=0-24"])
            _ = try c.get(target, headers: ["Range: bytes=25-49"])
            XCTAssertFalse(isHit(try c.get(target, headers: ["Range: bytes=0-9"])), "\(target): the first piece was replaced")
            XCTAssertFalse(isHit(try c.get(target)), target)
        }
    }
}

extension PartialContentEndToEndTests {
    /// A stored piece from byte 0 and a request for the whole: the rest
    /// is asked for (Range from the piece's end, If-Range with its ETag),
    /// the client gets the piece and the rest as one 200, and the joined
    /// whole is stored (cache-tests' optimal partial-store-partial-complete).
    /// A piece that ends the representation (a player's seek to the end)
    /// is completed too: the upstream is asked for the start alone, and
    /// the client gets it, then the stored piece, as one 200.
    func testAStoredPieceThatEndsTheRepresentationIsCompletedWithItsStart() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/part/tail?size=100&etag=t1&ranges=1"
        let whole = try larder.client().get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        let c = try larder.client()
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=-30"]).status, 206)
        let completed = try c.get(target)
        XCTAssertEqual(completed.status, 200)
        XCTAssertEqual(completed.header("content-length"), "100")
        XCTAssertNil(completed.header("content-range"))
        XCTAssertEqual(completed.header("cache-status"), "larder; fwd=partial; fwd-status=206; stored")
        XCTAssertEqual(completed.body, whole, "the upstream's start, then the stored end")
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        XCTAssertTrue(pairs.contains(["range", "bytes=0-69"]), "only the start is asked: \(pairs)")
        XCTAssertTrue(pairs.contains(["if-range", "\"t1\""]), "\(pairs)")
        let hit = try c.get(target)
        XCTAssertTrue(isHit(hit), "the joined whole is stored: \(hit.headers)")
        XCTAssertEqual(hit.body, whole)
        XCTAssertEqual(try origin.count(target), 2)
        // The connection still serves: the answer's length was what it said.
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=10-19"]).body, Array(whole[10..<20]))
    }

    /// A range that reaches past a stored piece (a player's next range)
    /// asks the upstream only for the bytes the piece lacks; the client
    /// gets its range from both, and the two join.
    func testARangeReachingPastAStoredPieceAsksOnlyForWhatItLacks() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/part/next?size=100&etag=n1&ranges=1"
        let whole = try larder.client().get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        let c = try larder.client()
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=0-39"]).status, 206)
        let next = try c.get(target, headers: ["Range: bytes=20-59"])
        XCTAssertEqual(next.status, 206)
        XCTAssertEqual(next.header("content-range"), "bytes 20-59/100")
        XCTAssertEqual(next.header("content-length"), "40")
        XCTAssertEqual(next.header("cache-status"), "larder; fwd=partial; fwd-status=206; stored")
        XCTAssertEqual(next.body, Array(whole[20..<60]), "the stored bytes, then the upstream's")
        var asked = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        XCTAssertTrue(asked.contains(["range", "bytes=40-59"]), "only what the piece lacks: \(asked)")
        XCTAssertTrue(asked.contains(["if-range", "\"n1\""]), "\(asked)")
        let joined = try c.get(target, headers: ["Range: bytes=0-59"])
        XCTAssertTrue(isHit(joined), "the two pieces joined: \(joined.headers)")
        XCTAssertEqual(joined.body, Array(whole[0..<60]))

        // A piece that holds the end of the range: the upstream's bytes come first.
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=-20"]).status, 206)
        let before = try c.get(target, headers: ["Range: bytes=70-89"])
        XCTAssertEqual(before.header("content-range"), "bytes 70-89/100")
        XCTAssertEqual(before.body, Array(whole[70..<90]))
        asked = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        XCTAssertTrue(asked.contains(["range", "bytes=70-79"]), "\(asked)")
        XCTAssertEqual(try origin.count(target), 4)
        // The connection still serves: each answer was as long as it said.
        XCTAssertTrue(isHit(try c.get(target, headers: ["Range: bytes=80-99"])))
    }

    func testAStoredPieceIsCompletedWithTheRestForAClientAskingForTheWhole() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/part/f?size=100&etag=c1&ranges=1"
        let whole = try larder.client().get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        let c = try larder.client()
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=0-39"]).status, 206)
        let completed = try c.get(target)
        XCTAssertEqual(completed.status, 200)
        XCTAssertEqual(completed.header("content-length"), "100")
        XCTAssertNil(completed.header("content-range"))
        XCTAssertEqual(completed.header("cache-status"), "larder; fwd=partial; fwd-status=206; stored")
        XCTAssertEqual(completed.body, whole)
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        XCTAssertTrue(pairs.contains(["range", "bytes=40-"]), "\(pairs)")
        XCTAssertTrue(pairs.contains(["if-range", "\"c1\""]), "\(pairs)")
        let hit = try c.get(target)
        XCTAssertTrue(isHit(hit), "the joined whole is stored")
        XCTAssertEqual(hit.body, whole)
        XCTAssertEqual(try origin.count(target), 2)

        // A piece of a representation that changed since: the upstream
        // answers the whole (If-Range), which the client gets as is.
        let changing = "/part/g?size=100&ranges=1&etag=v1&etag_then=v2"
        XCTAssertEqual(try c.get(changing, headers: ["Range: bytes=0-9"]).status, 206)
        let changed = try c.get(changing)
        XCTAssertEqual(changed.status, 200)
        XCTAssertEqual(changed.header("etag"), "\"v2\"")
        XCTAssertEqual(changed.header("cache-status"), "larder; fwd=partial; fwd-status=200; stored")
        XCTAssertEqual(changed.body.count, 100)
        XCTAssertTrue(isHit(try c.get(changing)))

        // A piece without a validator: the rest is asked for all the same
        // (cache-tests' partial-store-partial-complete), without If-Range;
        // a rest that comes cannot be joined (nothing shows it is the same
        // representation), so the whole is asked for and is what the client gets.
        let plain = "/part/h?size=100&ranges=1"
        XCTAssertEqual(try c.get(plain, headers: ["Range: bytes=0-29"]).status, 206)
        let rest = try c.get(plain)
        XCTAssertEqual(rest.status, 200)
        XCTAssertEqual(rest.body, try larder.client().get(plain.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body)
        let asked = try origin.lastRequest(plain)["headers"] as? [[String]] ?? []
        XCTAssertFalse(asked.contains { $0[0] == "range" }, "the last request, for the whole, asks no range: \(asked)")
        XCTAssertEqual(try origin.count(plain), 3, "the piece, the rest (not joined), the whole")
        XCTAssertTrue(isHit(try c.get(plain)))
    }
}

extension PartialContentEndToEndTests {
    /// Several ranges on a miss go upstream as asked and the client gets
    /// the upstream's multipart/byteranges 206 at once; its parts are
    /// stored as a piece (parts that touch joined; with another piece
    /// they touch, joined with it too), which answers later ranges and
    /// becomes the whole once the pieces cover it.
    func testAMultipartAnswerIsSplitIntoStoredPieces() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/part/m?size=100&etag=m1&ranges=1"
        let whole = try larder.client().get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        let c = try larder.client()
        let miss = try c.get(target, headers: ["Range: bytes=0-9, 10-19, 50-59"])
        XCTAssertEqual(miss.status, 206)
        XCTAssertEqual(miss.header("content-type"), "multipart/byteranges; boundary=SEP")
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        XCTAssertTrue(pairs.contains(["range", "bytes=0-9, 10-19, 50-59"]), "the ranges go upstream as asked: \(pairs)")
        let held = try c.get(target, headers: ["Range: bytes=5-14"])
        XCTAssertTrue(isHit(held), "0-9 and 10-19 stored as one piece")
        XCTAssertEqual(held.status, 206)
        XCTAssertEqual(held.header("content-range"), "bytes 5-14/100")
        XCTAssertEqual(held.header("content-type"), "application/octet-stream", "the part's type, not multipart")
        XCTAssertEqual(held.body, Array(whole[5...14]))
        XCTAssertEqual(try origin.count(target), 1)

        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=20-39, 80-89"]).status, 206)
        let joined = try c.get(target, headers: ["Range: bytes=0-39"])
        XCTAssertTrue(isHit(joined), "20-39 joined the stored 0-19")
        XCTAssertEqual(joined.body, Array(whole[0...39]))
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=40-69,70-99"]).status, 206)
        let complete = try c.get(target)
        XCTAssertTrue(isHit(complete), "the pieces made up the whole")
        XCTAssertEqual(complete.status, 200)
        XCTAssertEqual(complete.body, whole)
        XCTAssertEqual(try origin.count(target), 3)
    }

    /// Overlapping, unordered or very many ranges (an answer larger than
    /// the whole) never reach the upstream: the whole is fetched, stored
    /// and sent.
    func testImmodestSetsOfRangesFetchTheWhole() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let many = (0..<40).map { "\($0)-\($0 + 60)" }.joined(separator: ",")
        for (name, range) in [("overlapping", "bytes=0-99,0-99,0-99"), ("unordered", "bytes=50-59,0-9"), ("many", "bytes=" + many)] {
            let target = "/part/\(name)?size=100&etag=h1&ranges=1"
            let r = try larder.client().get(target, headers: ["Range: \(range)"])
            XCTAssertEqual(r.status, 200, name)
            XCTAssertEqual(r.body.count, 100, name)
            let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
            XCTAssertFalse(pairs.contains { $0.first == "range" }, "\(name): \(pairs)")
            XCTAssertTrue(isHit(try larder.client().get(target)), name)
        }
    }

    /// A 416 (a Range beyond the end) or a 412 (a failed If-Match) with
    /// explicit freshness answers that request only: stored, it would be
    /// every later client's answer for the URL.
    func testAnswersToARequestsRangeOrPreconditionsAreNotStored() throws {
        for (target, field) in [("/part/r416?status=416&extra=Content-Range:bytes%20*/100", "Range: bytes=500-"),
                                ("/part/r412?status=412", "If-Match: \"other\"")] {
            let c = try larder.client()
            let first = try c.get(target, headers: [field])
            XCTAssertEqual(first.header("cache-status"), "larder; fwd=uri-miss", target)
            XCTAssertFalse(isHit(try c.get(target)), target)
            XCTAssertEqual(try origin.count(target), 2, target)
        }
    }

    /// A request collapsed onto a fetch for a range gets the leader's 206
    /// only when it asks for the same range: a request for the whole
    /// waits, then fetches the whole on its own.
    func testARequestForTheWholeIsNotAnsweredWithACollapsedRange() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/part/k?size=100&etag=k1&ranges=1&delay=1"
        let port = larder.port
        final class Box: @unchecked Sendable { var response: HTTPResponse? }
        let ranged = Box(), same = Box()
        let done = expectation(description: "ranged requests answered")
        done.expectedFulfillmentCount = 2
        Thread { ranged.response = try? HTTPClient(port: port).get(target, headers: ["Range: bytes=0-4"]); done.fulfill() }.start()
        XCTAssertEqual(try origin.waitForCount(target, atLeast: 1), 1)
        Thread { same.response = try? HTTPClient(port: port).get(target, headers: ["Range: bytes=0-4"]); done.fulfill() }.start()
        let whole = try larder.client().get(target)
        wait(for: [done], timeout: 20)
        XCTAssertEqual(whole.status, 200)
        XCTAssertEqual(whole.body.count, 100)
        XCTAssertNil(whole.header("content-range"))
        XCTAssertEqual(ranged.response?.status, 206)
        XCTAssertEqual(same.response?.status, 206)
        XCTAssertEqual(same.response?.body.count, 5)
        XCTAssertEqual(same.response?.body, ranged.response?.body)
    }

    /// `Range: bytes=0-` (what video players ask first) gets a 206 of all
    /// of it: stored as the 200 it amounts to, which answers a request for
    /// the whole and every range.
    func testAPartialAnswerHoldingAllOfItIsStoredAsTheWhole() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/part/all?size=100&etag=a1&ranges=1"
        let c = try larder.client()
        let first = try c.get(target, headers: ["Range: bytes=0-"])
        XCTAssertEqual(first.status, 206)
        XCTAssertEqual(first.header("content-range"), "bytes 0-99/100")
        let whole = try c.get(target)
        XCTAssertTrue(isHit(whole))
        XCTAssertEqual(whole.status, 200)
        XCTAssertNil(whole.header("content-range"))
        XCTAssertEqual(whole.body, first.body)
        let part = try c.get(target, headers: ["Range: bytes=10-19"])
        XCTAssertTrue(isHit(part))
        XCTAssertEqual(part.body, Array(first.body[10...19]))
        XCTAssertEqual(try origin.count(target), 1)
    }

    /// With range_fill (the default) the whole follows a multipart miss in
    /// the background; several ranges are then answered from it with the
    /// whole (RFC 9110 section 14.2 lets a server ignore Range).
    func testSeveralRangesAreFilledAndThenAnsweredWithTheWhole() throws {
        let target = "/part/w?size=100&etag=w1&ranges=1"
        let c = try larder.client()
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=0-9, 50-59"]).status, 206)
        XCTAssertTrue(try waitUntilStoredWhole(target, on: larder))
        let hit = try c.get(target, headers: ["Range: bytes=0-9, 50-59"])
        XCTAssertTrue(isHit(hit))
        XCTAssertEqual(hit.status, 200)
        XCTAssertEqual(hit.body.count, 100)
        XCTAssertEqual(try origin.count(target), 2, "the ranges, then the whole")
    }

    /// A 206 whose body is not what it claims is passed on, never stored:
    /// a Content-Range larger than the body, a multipart body whose part
    /// is shorter than its Content-Range, a multipart body without its
    /// closing delimiter.
    func testAPartialAnswerThatContradictsItselfIsNotStored() throws {
        let (_, larder) = try start(config: "range_fill = false\n")
        let c = try larder.client()
        let short = "/part/x?size=5&status=206&extra=Content-Range:bytes%200-99999/100000"
        XCTAssertEqual(try c.get(short, headers: ["Range: bytes=0-99999"]).body.count, 5)
        let later = try c.get(short, headers: ["Range: bytes=50000-50009"])
        XCTAssertFalse(isHit(later), "not stored")
        XCTAssertEqual(later.body.count, 5, "the upstream's answer again, not bytes the piece lacks")
        let part = "--B\r\nContent-Range: bytes 0-9/100\r\n\r\n"
        for (name, body) in [("short-part", part + "01234\r\n--B--\r\n"), ("unclosed", part + "0123456789\r\n")] {
            let raw = "HTTP/1.1 206 Partial Content\r\nCache-Control: max-age=60\r\n"
                + "Content-Type: multipart/byteranges; boundary=B\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
            let target = "/part/\(name)?raw=" + raw.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            XCTAssertEqual(try c.get(target, headers: ["Range: bytes=0-9, 20-29"]).status, 206, name)
            XCTAssertFalse(isHit(try c.get(target, headers: ["Range: bytes=0-4"])), name)
        }
    }
}

extension PartialContentEndToEndTests {
    /// A piece is completed only for a request its Vary selects: another
    /// language's client gets its own whole response, not the piece's.
    func testAPieceIsNotCompletedForAnotherVariant() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/part/v?size=100&etag=v1&ranges=1&vary=Accept-Language"
        let c = try larder.client()
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=0-9", "Accept-Language: en"]).status, 206)
        let french = try c.get(target, headers: ["Accept-Language: fr"])
        XCTAssertEqual(french.status, 200)
        XCTAssertTrue(String(decoding: french.body.prefix(18), as: UTF8.self).hasPrefix("Accept-Language=fr"),
                      String(decoding: french.body.prefix(18), as: UTF8.self))
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        XCTAssertFalse(pairs.contains { $0.first == "range" }, "\(pairs)")
    }
}
