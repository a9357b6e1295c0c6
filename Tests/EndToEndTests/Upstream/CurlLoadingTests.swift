import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

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

    /// A request that needs the upstream while libcurl is still loading on
    /// its own thread waits for it without holding its worker's loop: the
    /// worker's other connections are answered meanwhile. (The "library" is
    /// a FIFO: the loader's dlopen waits in it for as long as the test
    /// keeps its writing end open and silent.)
    func testAWorkerAnswersOthersWhileLibcurlLoads() throws {
        let fifo = NSTemporaryDirectory() + "larder-slow-libcurl-\(UUID().uuidString)"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        defer { unlink(fifo) }
        let child = try ChildProcess(Paths.larder, ["serve", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9",
                                                    "--workers", "1", "--admin-listen", "none"], environment: ["LARDER_LIBCURL": fifo])
        defer { child.stop() }
        let port = try XCTUnwrap(child.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)").flatMap(Int.init), child.stderr)
        // The loader thread opens the FIFO: once it waits there, a writer
        // may open it too, and its read then waits for bytes that never come.
        var writer: Int32 = -1
        let deadline = Date().addingTimeInterval(10)
        while writer < 0 && Date() < deadline {
            writer = open(fifo, O_WRONLY | O_NONBLOCK)
            if writer < 0 { usleep(1_000) }
        }
        XCTAssertGreaterThanOrEqual(writer, 0, "libcurl's loader never opened the library: \(child.stderr)")
        defer { if writer >= 0 { close(writer) } }

        let miss = try HTTPClient(port: port)
        try miss.send("GET /needs-the-upstream HTTP/1.1\r\nHost: a\r\n\r\n")
        let other = try HTTPClient(port: port)
        try other.send("GET /other HTTP/1.1\r\nHost: a\r\nCache-Control: only-if-cached\r\n\r\n")
        XCTAssertEqual(try other.readResponse().status, 504, "answered by the one worker while the miss waits for libcurl")

        // The library ends without being one: the process says so and stops.
        close(writer)
        writer = -1
        XCTAssertEqual(child.waitForExit(timeout: 20), 1, child.stderr)
        child.drainOutput()
        XCTAssertTrue(child.stderr.contains("cannot load libcurl (\(fifo))"), child.stderr)
    }

    func testACommandWithoutLibcurlSaysWhy() throws {
        let r = try run(["stats", "--admin", "http://127.0.0.1:9"], libcurl: "/nonexistent/libcurl.so.4")
        XCTAssertNotEqual(r.status, 0, r.stderr)
        XCTAssertNotNil(r.status, "it ends")
        XCTAssertTrue(r.stderr.contains("cannot load libcurl (/nonexistent/libcurl.so.4)"), r.stderr)
    }
}
