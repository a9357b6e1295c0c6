import Foundation
import XCTest
@testable import larder
@testable import Configuration

/// What the binary brings to every start (bench/RESULTS.md): FoundationEssentials
/// only (full Foundation brought CoreFoundation and ICU, 50 MB and 1,900
/// conformances to scan; what the daemon used of it is ours now and tested
/// here), and no libcurl (with its ~30 libraries) to load before serving.
final class StartupFootprintTests: XCTestCase {
    private func output(_ tool: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "\(tool) \(arguments)")
        return text
    }

    func testTheBinaryUsesNothingFromFullFoundation() throws {
        let symbols = try output("/usr/bin/nm", ["-D", "--undefined-only", Paths.larder])
        XCTAssertTrue(symbols.contains("20FoundationEssentials"), "nm read the binary's symbols")
        let foundation = symbols.split(separator: "\n").filter { $0.contains("$s10Foundation") }
        XCTAssertEqual(foundation, [], "symbols of Foundation (CoreFoundation, ICU) in larder")
    }

    func testLibcurlAndItsLibrariesAreNotLoadedAtExec() throws {
        // dlopen'ed on a thread of its own once serving starts (CCurl's loader.c).
        let needed = try output("/usr/bin/readelf", ["-d", Paths.larder]).split(separator: "\n")
            .filter { $0.contains("(NEEDED)") }.compactMap { $0.split(separator: "[").last?.dropLast() }.map(String.init)
        XCTAssertTrue(needed.contains("libc.so.6"), "readelf listed the binary's libraries: \(needed)")
        XCTAssertFalse(needed.contains("libcurl.so.4"), "\(needed)")
        XCTAssertFalse(needed.contains("libcrypto.so.3"), "\(needed)")
    }

    func testJSONValuesReadAsTheToolsReadThem() throws {
        let value = try XCTUnwrap(JSONValue.parse("""
            {"n": 3, "x": 2.5, "whole": 4.0, "s": "a/b", "t": true, "none": null, "list": [1, {"k": "v"}]}
            """))
        XCTAssertEqual(value["n"]?.int, 3)
        XCTAssertEqual(value["n"]?.double, 3)
        XCTAssertEqual(value["x"]?.double, 2.5)
        XCTAssertNil(value["x"]?.int, "2.5 is not a whole number")
        XCTAssertEqual(value["whole"]?.int, 4)
        XCTAssertEqual(value["s"]?.string, "a/b")
        XCTAssertEqual(value["t"]?.bool, true)
        XCTAssertNil(value["t"]?.int, "true is not 1")
        XCTAssertEqual(value["none"], .null)
        XCTAssertEqual(value["list"]?.array?.last?["k"]?.string, "v")
        XCTAssertNil(value["absent"])
        XCTAssertNil(JSONValue.parse("{not json"))
        XCTAssertEqual(value["list"]?.text, #"[1,{"k":"v"}]"#)
        XCTAssertEqual(JSONValue.parse(#"{"b": 1, "a": "x/y"}"#)?.text, #"{"a":"x/y","b":1}"#, "sorted keys, slashes kept")
    }

    func testFixedPointTextAsPrintfWritesIt() {
        XCTAssertEqual(fixedPoint(0.123456, digits: 4), "0.1235")
        XCTAssertEqual(fixedPoint(12.25, digits: 1), "12.3")
        XCTAssertEqual(fixedPoint(3, digits: 2), "3.00")
        XCTAssertEqual(fixedPoint(0.05, digits: 2), "0.05")
        XCTAssertEqual(fixedPoint(-1.5, digits: 1), "-1.5")
        XCTAssertEqual(fixedPoint(-0.001, digits: 2), "0.00")
        XCTAssertEqual(fixedPoint(99.96, digits: 1), "100.0")
        XCTAssertEqual(fixedPoint(7, digits: 0), "7")
        XCTAssertEqual(fixedPoint(.nan, digits: 1), "nan")
        XCTAssertEqual(twoDigits(7), "07")
        XCTAssertEqual(twoDigits(42), "42")
    }

    func testPercentEncodingKeepsOnlyWhatItIsTold() {
        XCTAssertEqual(Purge.encode("/v1/a b?c=é"), "/v1/a%20b%3Fc%3D%C3%A9")
        XCTAssertEqual(percentEncoded("5xx/", keeping: ""), "5xx%2F")
    }

    func testAConfigFileThatCannotBeReadSaysWhy() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-read-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: directory) }
        let binary = directory + "/binary.toml"
        try Data([0x6c, 0x6f, 0x67, 0xff, 0xfe]).write(to: URL(fileURLWithPath: binary))
        for (path, reason) in [(directory + "/absent.toml", "No such file or directory"), (directory, "Is a directory"),
                               (binary, "not UTF-8 text")] {
            let child = try ChildProcess(Paths.larder, ["check-config", "--config", path])
            let status = child.waitForExit(timeout: 20)
            if status == nil { child.stop() }
            child.drainOutput()
            XCTAssertEqual(status, 78, path)
            XCTAssertTrue(child.stderr.contains("cannot read the file (\(reason))"), child.stderr)
        }
    }
}
