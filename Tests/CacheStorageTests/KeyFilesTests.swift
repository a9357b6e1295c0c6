import XCTest
@testable import CacheStorage

/// A key's files: the first inline, the others in a table; whichever is
/// removed, the rest stay findable and one of them moves inline.
final class KeyFilesTests: XCTestCase {
    private func item(_ bytes: Int) -> DiskIndex.Item { DiskIndex.Item(bytes: bytes, lastUse: 0, storedAt: 1) }

    /// Each file's size, by the variant its name stands for.
    private func sizes(_ files: KeyFiles) -> [String: Int] {
        let variants = Dictionary(uniqueKeysWithValues: ["a", "b", "c", "d"].map { (fileName($0), $0) })
        return Dictionary(uniqueKeysWithValues: files.map { (variants[$0.name] ?? "?", $0.item.bytes) })
    }

    private let a = fileName("a"), b = fileName("b"), c = fileName("c"), d = fileName("d"), missing = fileName("missing")

    func testOneFileIsFoundReplacedAndRemoved() {
        var files = KeyFiles()
        XCTAssertTrue(files.isEmpty)
        XCTAssertNil(files.updateValue(item(1), forKey: a))
        XCTAssertEqual(files[a]?.bytes, 1)
        XCTAssertNil(files[b])
        XCTAssertEqual(files.updateValue(item(2), forKey: a)?.bytes, 1, "the replaced one comes back")
        XCTAssertEqual(files.count, 1)
        XCTAssertEqual(sizes(files), ["a": 2])
        XCTAssertNil(files.removeValue(forKey: b))
        XCTAssertEqual(files.removeValue(forKey: a)?.bytes, 2)
        XCTAssertTrue(files.isEmpty)
        XCTAssertEqual(files.count, 0)
        XCTAssertEqual(Array(files).count, 0)
    }

    func testRemovingTheInlineFileKeepsTheOthers() {
        var files = KeyFiles()
        for (i, name) in [a, b, c].enumerated() { files[name] = item(i + 1) }
        XCTAssertEqual(files.count, 3)
        XCTAssertEqual(sizes(files), ["a": 1, "b": 2, "c": 3])
        files[a] = nil
        XCTAssertEqual(sizes(files), ["b": 2, "c": 3])
        XCTAssertEqual(files[b]?.bytes, 2)
        XCTAssertEqual(files[c]?.bytes, 3)
        files[c] = item(30)
        XCTAssertEqual(sizes(files), ["b": 2, "c": 30])
        XCTAssertEqual(files.removeValue(forKey: b)?.bytes, 2)
        XCTAssertEqual(files.removeValue(forKey: c)?.bytes, 30)
        XCTAssertTrue(files.isEmpty)
        files[d] = item(4)
        XCTAssertEqual(sizes(files), ["d": 4], "an emptied one starts again inline")
    }

    func testChangesInPlaceReachEveryFile() {
        var files = KeyFiles()
        files[a] = item(1)
        files[b] = item(2)
        files.modify(b) { $0.verified = true }
        files.modify(missing) { $0.verified = true }
        XCTAssertEqual(files[a]?.verified, false)
        XCTAssertEqual(files[b]?.verified, true)
        XCTAssertNil(files[missing], "modify adds nothing")
        var seen: [FileName] = []
        files.forEachInPlace { name, item in
            seen.append(name)
            item.lastUse = 7
        }
        XCTAssertEqual(Set(seen), [a, b])
        XCTAssertEqual(files.map(\.item.lastUse), [7, 7])
        XCTAssertEqual(Set(files.names), [a, b])
    }

    /// The disk index's files by key: each key in a block of its own with
    /// its bytes after its files; a key goes when its last file does, and
    /// every key stays findable through removals (backward-shift deletion
    /// in the probe runs that 3,000 keys make) and growth.
    func testDiskFilesFindEveryKeyThroughRemovalsAndGrowth() {
        let files = DiskFiles(keepLimit: 0)
        var live: [String: Int] = [:]
        // Long keys (not a small string's 15 bytes) and one empty.
        let keys = [""] + (0..<3000).map { "/files/key-\($0)?query=\(String(repeating: "x", count: $0 % 40))" }
        for (i, key) in keys.enumerated() {
            files.withFiles(of: key) { variants in
                XCTAssertNil(variants, key)
                variants = KeyFiles()
                variants!.updateValue(item(i), forKey: a)
            }
            live[key] = i
            if i % 3 == 2 {
                let victim = keys[i / 2]
                files.withFiles(of: victim) { variants in
                    XCTAssertEqual(variants?[a]?.bytes, live[victim], victim)
                    variants?.removeValue(forKey: a)
                    if variants?.isEmpty == true { variants = nil }
                }
                live[victim] = nil
            }
        }
        for key in keys { XCTAssertEqual(files.withFiles(of: key) { $0?[a]?.bytes }, live[key], key) }
        var seen: [String: Int] = [:]
        files.forEach { key, variants in seen[key] = variants[a]?.bytes }
        XCTAssertEqual(seen, live)
        // A hit's use changes the entry in its block.
        let some = live.first!
        XCTAssertEqual(files.use(some.key, overheadBytes: 0)?.first?.size, some.value)
        XCTAssertNotEqual(files.withFiles(of: some.key) { $0?[a]?.lastUse }, 0)
        XCTAssertNil(files.use("/absent", overheadBytes: 0))
    }
}
