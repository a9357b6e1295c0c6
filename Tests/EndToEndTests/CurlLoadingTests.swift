import XCTest

/// libcurl is opened at run time (a start does not wait for its
/// libraries): where it cannot be, Larder says so and stops, as it would
/// have at exec.
final class CurlLoadingTests: XCTestCase {
    private func run(_ arguments: [String], libcurl: String) throws -> (status: Int32?, stderr: String) {
        let child = try ChildProcess(Paths.larder, arguments, environment: ["LARDER_LIBCURL": libcurl])
        let status = child.waitForExit(timeout: 30)
        if status == nil { child.stop() }
        child.drainOutput()
        return (status, child.stderr)
    }

    private let serve = ["serve", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9", "--admin-listen", "none"]

    func testServeWithoutLibcurlSaysWhyAndExits() throws {
        let r = try run(serve, libcurl: "/nonexistent/libcurl.so.4")
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("cannot load libcurl (/nonexistent/libcurl.so.4)"), r.stderr)
        XCTAssertTrue(r.stderr.contains("No such file"), "the loader's reason: \(r.stderr)")
    }

    func testALibraryThatIsNotLibcurlIsRefusedByName() throws {
        let zlib = try XCTUnwrap(["/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib64/libz.so.1"]
            .first { FileManager.default.fileExists(atPath: $0) })
        let r = try run(serve, libcurl: zlib)
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("\(zlib) has no curl_version: not a libcurl this build can use"), r.stderr)
    }

    func testACommandWithoutLibcurlSaysWhy() throws {
        let r = try run(["stats", "--admin", "http://127.0.0.1:9"], libcurl: "/nonexistent/libcurl.so.4")
        XCTAssertNotEqual(r.status, 0, r.stderr)
        XCTAssertNotNil(r.status, "it ends")
        XCTAssertTrue(r.stderr.contains("cannot load libcurl (/nonexistent/libcurl.so.4)"), r.stderr)
    }
}
