import Foundation
import XCTest
@testable import Configuration

/// The configuration reference and the keys the daemon knows agree.
final class ConfigReferenceTests: XCTestCase {
    /// docs/configuration.md names every key the daemon knows, and no other.
    func testTheConfigurationReferenceNamesEveryKey() throws {
        let text = try String(contentsOfFile: packageRoot.appendingPathComponent("docs/configuration.md").path, encoding: .utf8)
        let documented = Set(text.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("| `") else { return nil }
            return String(line.dropFirst(3).prefix { $0 != "`" })
        })
        let known = Set(ConfigKey.allCases.map(\.rawValue) + EdgeConfig.keys + EdgeConfig.globalKeys)
        XCTAssertEqual(known.subtracting(documented), [], "keys the reference leaves out")
        XCTAssertEqual(documented.subtracting(known), [], "keys the reference names that the daemon does not know")
        for key in ConfigFile.routeKeys + ListenerConfig.keys + FleetConfig.keys where key != "prefix" && key != "address" {
            XCTAssertTrue(text.contains("`\(key)`"), "\(key) in docs/configuration.md")
        }
    }
}
