import HTTPHeaders
import XCTest
import CacheSemantics
@testable import CacheStorage

final class DiskFormatTests: XCTestCase {
    private func record(_ key: String = "/a?b=1", body: [UInt8] = Array("hello world".utf8)) -> DiskRecord {
        var head = testHead(key, fields: ["cache-control": "max-age=60", "etag": "\"x\"", "x-\u{FC}": "v\u{E4}lue"],
                            timing: ResponseTiming(requestTime: 100, responseTime: 101, dateValue: nil, ageValue: 3),
                            varyNames: ["accept-language"], varyValues: [nil])
        head.otherFields = ["cdn-cache-control": "max-age=5"]
        head.hasValidator = true
        head.coding = StoredCoding.none
        return DiskRecord(head: head, storedAt: 102, body: body)
    }

    /// The body's coding travels in the record; a record written before it
    /// did has its head read for it.
    func testTheBodysCodingIsKeptOrReadFromTheHead() throws {
        for coding in [StoredCoding.gzip, .zstd, .br] {
            var coded = record()
            coded.head = testHead("/g", fields: ["content-encoding": coding.token, "cache-control": "max-age=60"],
                                  timing: ResponseTiming(requestTime: 100, responseTime: 101, dateValue: nil, ageValue: 0))
            for known: StoredCoding? in [coding, nil] {
                coded.head.coding = known
                let entry = try DiskFormat.decode(DiskFormat.encode(coded)).response
                XCTAssertEqual(entry.coding, coding, "known: \(String(describing: known))")
                XCTAssertEqual(try DiskFormat.decode(DiskFormat.encode(coded)).head.coding, known)
            }
        }
        XCTAssertEqual(try DiskFormat.decode(DiskFormat.encode(record())).response.coding, StoredCoding.none)
        // A file of a Larder before zstd and br: bit 1 alone said gzip.
        XCTAssertEqual(DiskFormat.coding(bits: 4 | 2), .gzip)
        XCTAssertEqual(DiskFormat.coding(bits: 4), StoredCoding.none)
        XCTAssertNil(DiskFormat.coding(bits: 1))
    }

    /// A record from Redis or a changed file is not trusted: times beyond
    /// any clock (near Int64.min trapped in the freshness arithmetic) and a
    /// negative Age make it not Larder's, refused where it is decoded.
    func testRecordsWithTimesBeyondAnyClockAreRefused() throws {
        let mutations: [(inout DiskRecord) -> Void] = [
            { $0.head.timing.requestTime = Int64.min + 1 },
            { $0.head.timing.responseTime = Int64.max },
            { $0.head.timing.dateValue = Int64.min + 1 },
            { $0.head.timing.ageValue = -5 },
            { $0.storedAt = 300_000_000_000 },
        ]
        for (index, mutate) in mutations.enumerated() {
            var hostile = record()
            mutate(&hostile)
            let bytes = DiskFormat.encode(hostile)
            XCTAssertThrowsError(try DiskFormat.decode(bytes), "mutation \(index)")
            XCTAssertThrowsError(try DiskFormat.decodeEntry(bytes, key: hostile.key, verify: true), "mutation \(index)")
        }
        var plain = record()
        plain.head.timing.dateValue = nil
        XCTAssertEqual(try DiskFormat.decode(DiskFormat.encode(plain)), plain, "no Date is not an extreme one")
        // Shifted by an absurd fleet clock offset: saturated, not trapped.
        let shifted = try DiskFormat.decodeEntry(DiskFormat.encode(record()), key: record().key, verify: true, shiftSeconds: Int64.min)
        XCTAssertEqual(shifted?.storedAt, Int64.min + 102)
        XCTAssertGreaterThanOrEqual(shifted?.entry.currentAge(now: Int64.max) ?? -1, 0)
    }

    /// What the writer makes of any upstream's values is read back: an Age
    /// beyond delta-seconds (2^31, as RFC 9111 section 1.2.2 saturates it)
    /// and the last date HTTP can write. Before, such an Age made the file
    /// "unreadable" and it was dropped at the next start.
    func testTheExtremesAnUpstreamCanSendAreReadBack() throws {
        var extreme = record()
        extreme.head.timing.ageValue = try XCTUnwrap(Freshness.parseAge("999999999999999999999"))
        extreme.head.timing.dateValue = HTTPDate.parse("Fri, 31 Dec 9999 23:59:59 GMT")
        XCTAssertNotNil(extreme.head.timing.dateValue)
        let bytes = DiskFormat.encode(extreme)
        XCTAssertEqual(try DiskFormat.decode(bytes), extreme)
        XCTAssertNotNil(try DiskFormat.decodeEntry(bytes, key: extreme.key, verify: true))
        extreme.head.timing.ageValue += 1
        XCTAssertThrowsError(try DiskFormat.decode(DiskFormat.encode(extreme)), "beyond what any upstream's Age becomes")
    }

    func testRoundTrip() throws {
        for body in [[], Array("x".utf8), [UInt8](repeating: 7, count: 100_003)] {
            let original = record(body: body)
            XCTAssertEqual(try DiskFormat.decode(DiskFormat.encode(original)), original)
        }
    }

    func testChecksumCatchesAnyFlippedByte() throws {
        let bytes = DiskFormat.encode(record())
        for index in stride(from: DiskFormat.fixedHeaderBytes, to: bytes.count, by: 3) {
            var corrupt = bytes
            corrupt[index] ^= 0x40
            XCTAssertThrowsError(try DiskFormat.decode(corrupt), "byte \(index)")
        }
    }

    func testTruncatedAndForeignFilesAreRejected() {
        let bytes = DiskFormat.encode(record())
        XCTAssertThrowsError(try DiskFormat.decode(Array(bytes.dropLast()))) { XCTAssertEqual($0 as? DiskFormat.Failure, .truncated) }
        XCTAssertThrowsError(try DiskFormat.decode(Array(bytes.prefix(10)))) { XCTAssertEqual($0 as? DiskFormat.Failure, .truncated) }
        var other = bytes
        other[0] = UInt8(ascii: "X")
        XCTAssertThrowsError(try DiskFormat.decode(other)) { XCTAssertEqual($0 as? DiskFormat.Failure, .badMagic) }
    }

    func testVersionMismatchIsRejected() {
        var bytes = DiskFormat.encode(record())
        bytes[4] = 5
        XCTAssertThrowsError(try DiskFormat.decode(bytes)) { XCTAssertEqual($0 as? DiskFormat.Failure, .unsupportedVersion(5)) }
    }

    func testTagsAndTheStaleFlagRoundTrip() throws {
        var original = record()
        original.head.tags = ["user-1", "v2"]
        original.markedStale = true
        XCTAssertEqual(try DiskFormat.decode(DiskFormat.encode(original)), original)
        // The flag is outside the checksum: a soft purge sets it in place.
        var bytes = DiskFormat.encode(record())
        bytes[DiskFormat.flagsOffset] = UInt8(DiskFormat.staleFlag)
        XCTAssertTrue(try DiskFormat.decode(bytes).markedStale)
    }

    func testOlderVersionsAreRefused() {
        // Versions 1 and 2 kept raw fields for the proxy to rebuild, 3 a
        // weaker sum: they are dropped (a miss), never misread.
        for old: UInt8 in [1, 2, 3] {
            var bytes = DiskFormat.encode(record())
            bytes[4] = old
            XCTAssertThrowsError(try DiskFormat.decode(bytes)) {
                XCTAssertEqual($0 as? DiskFormat.Failure, .unsupportedVersion(UInt32(old)))
            }
        }
    }

    func testARecordIsTheStoredResponseAgain() throws {
        let original = record()
        let entry = try DiskFormat.decode(DiskFormat.encode(original)).response
        XCTAssertEqual(entry.key, "/a?b=1")
        XCTAssertEqual(Array(entry.body), original.body)
        XCTAssertEqual(entry.lifetime, 60)
        XCTAssertTrue(entry.hasValidator)
        XCTAssertEqual(entry.header("cdn-cache-control"), "max-age=5")
        // The head a hit sends: the stored fields, then Content-Length.
        XCTAssertTrue(String(decoding: entry.headPrefix, as: UTF8.self).hasSuffix("Content-Length: 11\r\n"))
        XCTAssertEqual(entry.storedHead, original.head, "Content-Length is not part of what is stored")
    }

    func testADiskHitDecodesStraightToTheSameResponse() throws {
        let original = record()
        let bytes = DiskFormat.encode(original)
        let (storedAt, entry) = try XCTUnwrap(try DiskFormat.decodeEntry(bytes, key: "/a?b=1", verify: true))
        let expected = original.response
        XCTAssertEqual(storedAt, 102)
        XCTAssertEqual(Array(entry.headPrefix), Array(expected.headPrefix), "the head a hit sends, Content-Length included")
        XCTAssertEqual(Array(entry.body), original.body)
        XCTAssertEqual(entry.storedHead, original.head)
        XCTAssertEqual(entry.timing, expected.timing)
        XCTAssertEqual(entry.correctedInitialAge, expected.correctedInitialAge)
        XCTAssertEqual(entry.cacheControl, expected.cacheControl)
        XCTAssertEqual(entry.costBytes, expected.costBytes)
        XCTAssertNil(try DiskFormat.decodeEntry(bytes, key: "/a?b=2", verify: true), "another key's file (a hash collision)")
        XCTAssertNil(try DiskFormat.decodeEntry(bytes, key: "/a?b=", verify: true), "a key that is a prefix of the stored one")
        var stale = bytes
        stale[DiskFormat.flagsOffset] = UInt8(DiskFormat.staleFlag)
        XCTAssertEqual(try DiskFormat.decodeEntry(stale, key: "/a?b=1", verify: true)?.entry.lifetime, 0, "soft-purged: no freshness left")
        var flipped = bytes
        flipped[flipped.count - 1] ^= 1
        XCTAssertThrowsError(try DiskFormat.decodeEntry(flipped, key: "/a?b=1", verify: true)) {
            XCTAssertEqual($0 as? DiskFormat.Failure, .checksumMismatch)
        }
        XCTAssertNotNil(try DiskFormat.decodeEntry(flipped, key: "/a?b=1", verify: false), "a verified file is not summed again")
        XCTAssertThrowsError(try DiskFormat.decodeEntry(Array(bytes.dropLast()), key: "/a?b=1", verify: false)) {
            XCTAssertEqual($0 as? DiskFormat.Failure, .truncated)
        }
    }

    func testMetaAloneDecodesWithoutTheBody() throws {
        let bytes = DiskFormat.encode(record())
        let header = try DiskFormat.header(bytes[...])
        let meta = try DiskFormat.decodeMeta(bytes[DiskFormat.fixedHeaderBytes..<(DiskFormat.fixedHeaderBytes + header.metaLength)])
        XCTAssertEqual(meta.key, "/a?b=1")
        XCTAssertEqual(meta.body, [])
        XCTAssertEqual(header.bodyLength, 11)
    }

    func testChecksumIsTheSameWhateverThePieces() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var whole = Checksum()
        whole.add(bytes)
        for cut in [1, 3, 7, 8, 9, 500, 999] {
            var pieces = Checksum()
            pieces.add(bytes[0..<cut])
            pieces.add(bytes[cut...])
            XCTAssertEqual(pieces.value, whole.value, "cut at \(cut)")
        }
        var other = Checksum()
        other.add(bytes.reversed())
        XCTAssertNotEqual(other.value, whole.value)
    }
}
