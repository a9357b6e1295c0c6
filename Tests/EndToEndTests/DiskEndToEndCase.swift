import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// What the disk tier's end-to-end tests share: an origin, a cache
/// directory of their own, and ways to watch its files.
class DiskEndToEndCase: ConfiguredTestCase {
    var origin: Origin!
    var directory = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        origin = try startOrigin()
        directory = temporaryPath("larder-e2e-disk")
    }

    func start(_ extra: [String] = [], environment: [String: String] = [:]) throws -> LarderProcess {
        try startLarder(upstream: origin.url, ["--cache-dir", directory] + extra, environment: environment)
    }

    func stop(_ l: LarderProcess) {
        kill(l.child.process.processIdentifier, SIGTERM)
        XCTAssertEqual(l.child.waitForExit(timeout: 20), 0)
    }

    func cacheFiles() -> [String] {
        (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? [])
            .filter { $0.hasSuffix(".lrd") }.map { directory + "/" + $0 }
    }

    /// A configuration file holding `text`, removed after the test.
    func config(_ text: String) throws -> String {
        let path = directory + "-config.toml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    /// Waits (bounded) until a cache file other than `other` holds at
    /// least `bytes` (the writer thread's work is seen on disk).
    func waitForCacheFile(holding bytes: Int, besides other: String? = nil, file: StaticString = #filePath, line: UInt = #line) {
        func largest() -> Int {
            cacheFiles().filter { $0 != other }
                .compactMap { (try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int) ?? nil }.max() ?? 0
        }
        let deadline = Date().addingTimeInterval(10)
        while largest() < bytes && Date() < deadline { usleep(20_000) }
        XCTAssertGreaterThanOrEqual(largest(), bytes, file: file, line: line)
    }
}
