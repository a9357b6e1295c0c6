import Foundation
import XCTest
@testable import larder

/// Replays fuzz/corpus/config_values (fuzz/run.sh config_values) with the
/// fuzz target's checks: the first byte picks the parser.
final class ConfigValuesCorpusTests: XCTestCase {
    func testConfigValueCorpus() {
        let dir = Paths.packageRoot.appendingPathComponent("fuzz/corpus/config_values").path
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        XCTAssertGreaterThan(names.count, 10, "the corpus is in the repository")
        for name in names {
            guard let data = FileManager.default.contents(atPath: dir + "/" + name), let first = data.first else { continue }
            let text = String(decoding: data.dropFirst(), as: UTF8.self)
            switch first % 5 {
            case 0: if let bytes = Units.parseSize(text) { XCTAssertGreaterThanOrEqual(bytes, 0, name) }
            case 1:
                if let ms = Units.parseDurationMilliseconds(text) {
                    XCTAssertTrue(ms >= 0 && ms <= Units.maxDurationMilliseconds, name)
                }
            case 2: if case .some(.some(let seconds)) = Units.parseLifetimeSeconds(text) { XCTAssertGreaterThanOrEqual(seconds, 0, name) }
            case 3: if let hp = Units.parseHostPort(text) { XCTAssertFalse(hp.host.isEmpty, name) }
            default: _ = Units.validUpstream(text)
            }
        }
        // The overflow the corpus once found: a refusal, not a crash.
        XCTAssertNil(Units.parseDurationMilliseconds("9223372036854775807"))
    }
}
