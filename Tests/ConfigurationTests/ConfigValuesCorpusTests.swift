import Foundation
import XCTest
@testable import Configuration

/// Replays fuzz/corpus/config_values (fuzz/run.sh config_values) with the
/// fuzz target's checks: the first byte picks the parser.
final class ConfigValuesCorpusTests: XCTestCase {
    func testConfigValueCorpus() {
        let dir = packageRoot.appendingPathComponent("fuzz/corpus/config_values").path
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

/// Where each key of a config file is, for errors that name its line.
final class ConfigKeyLinesTests: XCTestCase {
    func testKeysTablesAndRoutesByLine() {
        let text = """
            # a comment with = in it
            memory_limit = "64MiB"
              "workers"=2

            [presets]
            short = "1m"
            [[route]]
            prefix = "/a"
            [[ route ]]
            'prefix' = "/b"
            [fleet]
            redis = "redis://127.0.0.1"
            [something.else]
            ignored = 1
            """
        XCTAssertEqual(ConfigFile.keyLines(text), [
            "memory_limit": 2, "workers": 3, "presets": 5, "presets.short": 6, "route": 7, "route.0": 7,
            "route.0.prefix": 8, "route.1": 9, "route.1.prefix": 10, "fleet": 11, "fleet.redis": 12,
            "something": 13,  // a table no key names: its header, for the error (its keys are not recorded)
        ])
    }

    func testWindowsLineEndingsAndNonASCIIKeepTheirLines() {
        XCTAssertEqual(ConfigFile.keyLines("# é\r\nworkers = 2\r\n\r\n[[route]]\r\nprefix = \"/ü\"\r\n"),
                       ["workers": 2, "route": 4, "route.0": 4, "route.0.prefix": 5])
        XCTAssertEqual(ConfigFile.keyLines(""), [:])
        XCTAssertEqual(ConfigFile.keyLines("="), ["": 1], "an empty key is the loader's to refuse")
    }
}

/// The repository's root (the corpus and the docs are read from it).
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
