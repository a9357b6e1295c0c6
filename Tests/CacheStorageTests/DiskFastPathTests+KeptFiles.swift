import Threads
import XCTest
import Foundation
import Synchronization
import SystemPackage
import CacheSemantics
@testable import CacheStorage

/// Kept descriptors against files deleted, renamed onto or replaced by hand.
extension DiskFastPathTests {
    func testADeletedFileIsNotServedFromItsKeptDescriptor() throws {
        let tier = try openTier(recheck: 0)
        store(tier, record("/gone"))
        XCTAssertFalse(tier.lookup("/gone").isEmpty)
        XCTAssertEqual(tier.files.kept.value.load(ordering: .relaxed), 1)
        XCTAssertEqual(unlink(try path(of: "/gone")), 0)
        XCTAssertTrue(tier.lookup("/gone").isEmpty, "deleted on disk: a miss, as without a kept descriptor")
        XCTAssertEqual(tier.files.kept.value.load(ordering: .relaxed), 0)
        XCTAssertEqual(tier.stats.objects, 0)
    }

    func testADeletedFileIsServedFromItsKeptDescriptorUntilItIsCheckedAgain() throws {
        let tier = try openTier(recheck: .max)
        store(tier, record("/later"))
        XCTAssertFalse(tier.lookup("/later").isEmpty)
        XCTAssertEqual(unlink(try path(of: "/later")), 0)
        XCTAssertEqual(tier.lookup("/later").first?.bodyLength, 1000, "within the window the kept descriptor is trusted (no fstat)")
    }

    /// A file of its own, opened and kept as a hit keeps one.
    private func keptFile(linkedAt: UInt64) throws -> (file: KeptFile, path: String) {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/kept-\(linkedAt)"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data([1])))
        let fd = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        return (KeptFile(StoredFile(FileDescriptor(rawValue: fd), path: path), count: KeptCount(), linkedAt: linkedAt), path)
    }

    func testAKeptFileIsAskedAboutItsNameOncePerWindow() throws {
        let (file, path) = try keptFile(linkedAt: 1_000)
        XCTAssertTrue(file.isLinked(now: 1_400, recheckNanoseconds: 500))
        XCTAssertEqual(unlink(path), 0)
        XCTAssertTrue(file.isLinked(now: 1_499, recheckNanoseconds: 500), "seen linked at 1,000: trusted until 1,500")
        XCTAssertFalse(file.isLinked(now: 1_500, recheckNanoseconds: 500), "asked again: gone")
        XCTAssertFalse(file.isLinked(now: 1_501, recheckNanoseconds: 500), "and not trusted again")
    }

    func testAKeptFileSeenLinkedIsTrustedFromThen() throws {
        let (file, path) = try keptFile(linkedAt: 0)
        XCTAssertTrue(file.isLinked(now: 10_000, recheckNanoseconds: 500), "asked: still linked, noted at 10,000")
        XCTAssertEqual(unlink(path), 0)
        XCTAssertTrue(file.isLinked(now: 10_499, recheckNanoseconds: 500))
        XCTAssertFalse(file.isLinked(now: 10_500, recheckNanoseconds: 500))
    }

    func testAFileRenamedOntoItsNameIsReadInsteadOfTheKeptOne() throws {
        let tier = try openTier(recheck: 0)
        store(tier, record("/swap", bytes: 1000))
        XCTAssertEqual(tier.lookup("/swap").first?.bodyLength, 1000)
        let file = try path(of: "/swap")
        let newer = file + ".new"
        let record = DiskRecord(head: testHead("/swap"), storedAt: 1, body: [UInt8](repeating: 0x63, count: 2000))
        try Data(DiskFormat.encode(record)).write(to: URL(fileURLWithPath: newer))
        XCTAssertEqual(rename(newer, file), 0)
        XCTAssertEqual(tier.lookup("/swap").first?.bodyLength, 2000, "the file now under the name")
        XCTAssertEqual(tier.lookup("/swap").first?.bodyLength, 2000, "kept in its turn")
        XCTAssertEqual(tier.files.kept.value.load(ordering: .relaxed), 1, "the replaced one was closed")
    }

    func testKeptDescriptorsAreBounded() throws {
        let tier = try openTier(keptFiles: 2)
        for i in 0..<4 { store(tier, record("/b\(i)")) }
        for i in 0..<4 { XCTAssertEqual(tier.lookup("/b\(i)").first?.bodyLength, 1000) }
        XCTAssertEqual(tier.files.kept.value.load(ordering: .relaxed), 2)
        for i in 0..<4 { XCTAssertEqual(tier.lookup("/b\(i)").first?.bodyLength, 1000, "beyond the bound: opened and closed per hit") }
        XCTAssertEqual(tier.removeAll(), 4)
        XCTAssertEqual(tier.files.kept.value.load(ordering: .relaxed), 0)
    }
}
