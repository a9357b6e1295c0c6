import XCTest
import Foundation

/// A test case with a fresh cache directory of its own (not yet created:
/// a tier makes it), removed afterwards with the copies a test makes of
/// it to start a second tier (`directory + "-copy"`).
class DiskTestCase: XCTestCase {
    var directory = ""

    override func setUp() {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-\(type(of: self))-\(UUID().uuidString)").path
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
        try? FileManager.default.removeItem(atPath: directory + "-copy")
    }
}
