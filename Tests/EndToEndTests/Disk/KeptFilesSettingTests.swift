import Foundation
import Logging
import XCTest
import CacheStorage
@testable import larder
@testable import Configuration

/// `disk_open_files` as `larder serve` applies it.
final class KeptFilesSettingTests: XCTestCase {
    private let logger = Logger(label: "test")

    func testLeftOutItIsAQuarterOfTheOpenFileLimit() {
        XCTAssertEqual(Serve.keptFiles(-1, openFiles: 65_536, logger), DiskFiles.defaultKeepLimit())
    }

    func testAValueIsKeptUpToHalfTheOpenFileLimit() {
        XCTAssertEqual(Serve.keptFiles(0, openFiles: 1_024, logger), 0)
        XCTAssertEqual(Serve.keptFiles(300, openFiles: 1_024, logger), 300)
        XCTAssertEqual(Serve.keptFiles(900, openFiles: 1_024, logger), 512, "connections need the rest")
    }
}
