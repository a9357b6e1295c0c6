import Foundation
import XCTest
@testable import CacheStorage

/// A stored body as its sender sees it: slices and a whole read, the same
/// whether it is kept in the entry's block or in a file; a file cut
/// shorter behind Larder's back is seen.
final class StoredBodyTests: XCTestCase {
    private func text(_ bytes: StoredBytes) -> String {
        switch bytes {
        case .block(let entry, let range):
            return String(decoding: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(start: entry.blockStart,
                                                                                              count: range.upperBound)[range]), as: UTF8.self)
        case .file(let file, let range):
            var buffer = [UInt8](repeating: 0, count: range.count)
            let n = pread(file.fd.rawValue, &buffer, range.count, off_t(range.lowerBound))
            return String(decoding: buffer[0..<max(n, 0)], as: UTF8.self)
        }
    }

    private func read(_ body: StoredBody) -> (StoredBody.ReadInto, String) {
        var buffer = [UInt8](repeating: 0, count: body.count)
        let outcome = buffer.withUnsafeMutableBytes { body.read(into: $0, cachedOnly: false) }
        return (outcome, String(decoding: buffer, as: UTF8.self))
    }

    func testABodyInMemoryAndOneInAFileAreSlicedAndReadAlike() throws {
        let inMemory = Array("hello world".utf8).withUnsafeBytes { CachedResponse.make(head: testHead("/m"), body: $0) }
        let path = NSTemporaryDirectory() + "stored-body-\(getpid())"
        defer { unlink(path) }
        FileManager.default.createFile(atPath: path, contents: Data("xxhello world".utf8))
        let inFile = CachedResponse.make(head: testHead("/f"), body: UnsafeRawBufferPointer(start: nil, count: 0),
                                         bodyFile: try XCTUnwrap(FileBody(opening: path, offset: 2, length: 11)))
        for (entry, inMemoryExpected) in [(inMemory, true), (inFile, false)] {
            let body = entry.storedBody
            XCTAssertEqual(body.isInMemory, inMemoryExpected)
            XCTAssertEqual(body.count, 11)
            XCTAssertTrue(body.isReadable)
            XCTAssertEqual(text(body.whole), "hello world")
            XCTAssertEqual(text(body.slice(6..<11)), "world")
            XCTAssertEqual(body.slice(0..<5).count, 5)
            let (outcome, read) = self.read(body)
            XCTAssertEqual(outcome, .read)
            XCTAssertEqual(read, "hello world")
        }
        XCTAssertTrue(text(inMemory.storedBody.head).hasPrefix("HTTP/1.1 200"), "the stored head, as a hit sends it")

        truncate(path, 5)
        XCTAssertFalse(inFile.storedBody.isReadable, "cut shorter since: not there")
        XCTAssertEqual(read(inFile.storedBody).0, .failed)
        XCTAssertTrue(inFile.storedBody.place.contains(path))
    }
}
