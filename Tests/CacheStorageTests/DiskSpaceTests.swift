import XCTest
import Foundation
import Synchronization
import CacheSemantics
@testable import CacheStorage

/// A disk tier on a file system with less room than `disk_limit` keeps
/// below that room, evicting its least recently used files, instead of
/// failing every write once the file system is full.
final class DiskSpaceTests: DiskTestCase {
    func testTheCeilingIsWhatIsStoredPlusWhatIsFree() {
        let mib = 1 << 20
        // Room to spare: the limit holds.
        XCTAssertEqual(DiskSpace.ceiling(limit: 10 * mib, storedBytes: mib, available: 500 * mib), 10 * mib)
        // Less room than the limit allows: what is stored plus what is free.
        XCTAssertEqual(DiskSpace.ceiling(limit: 100 * mib, storedBytes: mib, available: 2 * mib), 3 * mib)
        XCTAssertEqual(DiskSpace.ceiling(limit: 100 * mib, storedBytes: 4 * mib, available: 0), 4 * mib)
        XCTAssertEqual(DiskSpace.ceiling(limit: 100 * mib, storedBytes: 0, available: -5), 0)
        XCTAssertEqual(DiskSpace.ceiling(limit: .max, storedBytes: .max, available: .max), .max, "saturates")
    }

    private func bytesOnDisk() -> Int {
        let names = (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".lrd") }
        return names.reduce(0) { total, name in
            total + ((try? FileManager.default.attributesOfItem(atPath: directory + "/" + name)[.size] as? Int) ?? 0)
        }
    }

    func testATierOnAFileSystemSmallerThanItsLimitKeepsToTheRoomThereIs() throws {
        // A 1 MiB file system under a 100 MiB disk_limit; its free bytes
        // are what the tier's files leave.
        let capacity = 1 << 20
        let logged = Mutex<[String]>([])
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20, spaceProbe: { [self] _ in
            max(0, capacity - bytesOnDisk())
        }) { line in logged.withLock { $0.append(line) } }
        let deadline = Date().addingTimeInterval(10)
        while !tier.stats.ready && Date() < deadline { usleep(5_000) }
        func record(_ i: Int) -> DiskRecord {
            DiskRecord(head: testHead("/s\(i)"), storedAt: 1, body: [UInt8](repeating: UInt8(i % 251), count: 60_000))
        }
        for i in 0..<10 { tier.store(record(i)) }  // about 650 KB: fits
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(tier.stats.objects, 10)
        XCTAssertFalse(tier.records("/s0").isEmpty)  // /s0 becomes the most recently used
        for i in 10..<20 { tier.store(record(i)) }  // 1.3 MB: more than the file system holds
        tier.flush(timeoutSeconds: 10)
        XCTAssertLessThanOrEqual(bytesOnDisk(), capacity, "never more than the file system holds")
        XCTAssertGreaterThanOrEqual(bytesOnDisk(), capacity * 85 / 100, "the room there is stays in use (16 files here)")
        XCTAssertFalse(tier.records("/s19").isEmpty, "the newest is stored")
        XCTAssertFalse(tier.records("/s0").isEmpty, "the recently used entry survives")
        XCTAssertTrue(tier.records("/s1").isEmpty, "the least recently used went to make room")
        XCTAssertTrue(logged.withLock { $0.contains { $0.contains("below disk_limit") } }, "\(logged.withLock { $0 })")
    }

    func testWithoutFiguresFromTheFileSystemOnlyTheLimitApplies() throws {
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20, spaceProbe: { _ in nil }) { _ in }
        let deadline = Date().addingTimeInterval(10)
        while !tier.stats.ready && Date() < deadline { usleep(5_000) }
        for i in 0..<20 {
            tier.store(DiskRecord(head: testHead("/n\(i)"), storedAt: 1, body: [UInt8](repeating: 1, count: 60_000)))
        }
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(tier.stats.objects, 20)
    }
}
