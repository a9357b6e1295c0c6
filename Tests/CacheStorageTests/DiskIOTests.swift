import XCTest
import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import CacheStorage

/// The one file layer's own edge: directory entries as the kernel packs them.
final class DiskIOTests: XCTestCase {
    /// The kernel packs directory entries by their real length, so the
    /// last one in readdir's buffer can end just before unmapped memory.
    /// Here one ends at a page that is followed by a page that cannot be
    /// read: its name must be read without touching that page (copying
    /// the whole `dirent` read 280 bytes and crashed the process).
    func testAnEntryEndingAtAnUnreadablePageIsReadInPlace() throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let mapping = try XCTUnwrap(mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        XCTAssertNotEqual(mapping, MAP_FAILED)
        defer { munmap(mapping, 2 * page) }
        XCTAssertEqual(mprotect(mapping + page, page, PROT_NONE), 0)
        let name = "0123456789abcdef-0123456789abcdef.lrd"
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        // The record as getdents writes it: header, name, NUL, rounded to 8.
        let length = (nameOffset + name.utf8.count + 1 + 7) & ~7
        XCTAssertLessThan(length, MemoryLayout<dirent>.size, "a short record, as most are")
        let record = mapping + page - length
        record.initializeMemory(as: UInt8.self, repeating: 0, count: length)
        record.storeBytes(of: UInt16(length), toByteOffset: MemoryLayout<dirent>.offset(of: \dirent.d_reclen)!, as: UInt16.self)
        for (i, byte) in name.utf8.enumerated() { record.storeBytes(of: byte, toByteOffset: nameOffset + i, as: UInt8.self) }
        XCTAssertEqual(DiskIO.entryName(record.assumingMemoryBound(to: dirent.self)), name)
    }

    func testAListingHasEveryNameButDotAndDotDot() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-io-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let names = (0..<300).map { String(repeating: "n", count: 1 + $0 % 200) + "-\($0)" }
        for name in names { XCTAssertTrue(FileManager.default.createFile(atPath: directory + "/" + name, contents: nil)) }
        XCTAssertEqual(DiskIO.listDirectory(directory).sorted(), names.sorted())
    }

    /// A disk hit's read buffer: the thread's own, kept and reused between
    /// reads (grown when one needs more), another thread's apart, and a
    /// read beyond its bound still served.
    func testTheReadScratchIsKeptPerThreadAndGrows() {
        let address = Self.scratchAddress
        let first = address(100)
        XCTAssertEqual(address(2000), first, "the same buffer again, no allocation per read")
        let grown = address(ReadScratch.maxBytes)
        XCTAssertEqual(address(10), grown, "kept at its grown size")
        XCTAssertNotEqual(address(ReadScratch.maxBytes + 1), 0)
        XCTAssertEqual(address(10), grown, "a read beyond the bound leaves it")
        final class Seen: @unchecked Sendable { var address = 0 }
        let other = Seen()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            other.address = Self.scratchAddress(100)
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertNotEqual(other.address, grown, "another thread's is its own")
    }

    /// Where a read of `count` bytes gets its buffer (all of it written).
    private static func scratchAddress(_ count: Int) -> Int {
        ReadScratch.with(count: count) { buffer in
            buffer.initializeMemory(as: UInt8.self, repeating: 0xAB)
            return buffer.count == count ? Int(bitPattern: buffer.baseAddress) : -1
        }
    }
}
