import Foundation
import TestSupport
import Threads
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 59's HTTP/2 defects, with a raw client (h2attacks.py). Each test
/// failed on the code before its fix.
final class HTTP2AbuseTests: ConfiguredTestCase {
    private func h2attacks(_ port: Int, _ arguments: [String], timeout: TimeInterval = 60) throws -> [String] {
        let r = try runProgram(["/usr/bin/python3", Paths.h2attacks, String(port)] + arguments, timeout: timeout)
        XCTAssertEqual(r.status, 0, "\(arguments): \(r.stderr)")
        return r.stdout.split(separator: "\n").map(String.init)
    }

    /// 130 streams at once against a limit of 100, after the SETTINGS ACK:
    /// the connection ended (GOAWAY PROTOCOL_ERROR) and all 130 were lost.
    /// RFC 9113 section 5.1.2: the 30 beyond the limit are refused alone.
    func testStreamsBeyondTheLimitAreRefusedAndTheRestServed() throws {
        let (origin, larder) = try start(config: "http2_max_concurrent_streams = 100\n")
        let lines = try h2attacks(larder.port, ["over-limit", "/h2/limit?delay=0.5&size=10", "130"])
        XCTAssertTrue(lines.contains("ADVERTISED 100"), "the client is told the limit: \(lines.prefix(2))")
        let streams = lines.filter { $0.hasPrefix("STREAM") }
        XCTAssertEqual(streams.count, 130, "every stream has an answer: \(lines.suffix(3))")
        XCTAssertEqual(streams.filter { $0.hasSuffix(" 200") }.count, 100, "the limit's worth served")
        XCTAssertEqual(streams.filter { $0.hasSuffix(" RESET 7") }.count, 30, "the rest refused (REFUSED_STREAM)")
        XCTAssertTrue(lines.contains("RESULT goaway=none"), "the connection goes on: \(lines.suffix(1))")
        XCTAssertEqual(try origin.count("/h2/limit?delay=0.5&size=10"), 1, "the 100 collapsed onto one fetch")
        // And it still serves: the next request on another connection is answered.
        XCTAssertEqual(try larder.client().get("/h2/after").status, 200)
    }

    /// A POST whose trailers are 16,000 references to a 4,000-byte HPACK
    /// entry (64 MB decoded) was answered 200 after the library had checked
    /// every byte of them. Trailers count against max_header_size as the
    /// head does: the stream is reset, the connection's table stays in step.
    func testTrailersBeyondTheHeaderLimitResetTheirStream() throws {
        let (_, larder) = try start(config: "max_header_size = \"16KiB\"\n")
        let lines = try h2attacks(larder.port, ["trailers", "/h2/trailers?size=5", "16000"])
        XCTAssertEqual(lines.filter { $0.hasPrefix("STREAM") }, ["STREAM 1 200", "STREAM 3 RESET 2", "STREAM 5 200"], "\(lines)")
        XCTAssertTrue(lines.contains("RESULT goaway=none"), "\(lines)")
    }

    /// SIGTERM with streams whose bodies wait in Larder for the client's
    /// window: the connection was closed with the client's WINDOW_UPDATEs
    /// unread, the kernel reset it, and the client lost the last DATA frames
    /// (0 to 81,920 bytes of 100,000). Every stream taken now ends whole.
    func testStreamsInFlightOnSIGTERMEndWhole() throws {
        let origin = try startOrigin()
        for round in 0..<2 {
            let larder = try startLarder(upstream: origin.url)
            let pid = larder.child.process.processIdentifier
            let lines = try h2attacks(larder.port, ["drain", "/h2/drain?size=100000&round=\(round)", "8", String(pid)])
            let streams = lines.filter { $0.hasPrefix("STREAM") }
            XCTAssertEqual(streams.count, 8, "\(lines)")
            for line in streams { XCTAssertTrue(line.hasSuffix(" 200 100000 1"), "round \(round): \(line)") }
            XCTAssertTrue(lines.contains("RESULT goaway=0"), "a graceful GOAWAY: \(lines.suffix(1))")
            XCTAssertEqual(larder.child.waitForExit(timeout: 20), 0, larder.child.stderr)
        }
    }

    /// A GET sent as HEADERS without END_STREAM, then an empty DATA frame
    /// that ends the stream, has no body: it was framed as an upload and
    /// never cached. It is a GET as any other now.
    func testAGetEndedByAnEmptyDataFrameIsCached() throws {
        let (origin, larder) = try start(config: "")
        let lines = try h2attacks(larder.port, ["empty-data", "/h2/empty-data?size=10"])
        let streams = lines.filter { $0.hasPrefix("STREAM") }
        XCTAssertEqual(streams.count, 2, "\(lines)")
        XCTAssertTrue(streams.first?.contains(" 200 larder; fwd=uri-miss; stored") ?? false, "\(streams)")
        XCTAssertTrue(streams.last?.contains(" 200 larder; hit") ?? false, "\(streams)")
        XCTAssertEqual(try origin.count("/h2/empty-data?size=10"), 1)
    }

    /// A client whose window stays below 512 bytes got no DATA until
    /// send_timeout (a public HTTP/2 suite failed 6 flow-control cases on
    /// it): after a short wait it gets what its window allows.
    func testAWindowThatStaysSmallGetsWhatFits() throws {
        let (_, larder) = try start(config: "send_timeout = \"60s\"\n")
        let lines = try h2attacks(larder.port, ["small-window", "/h2/small-window?size=2000", "300"])
        XCTAssertTrue(lines.contains("STREAM 1 200 2000 1"), "the whole body, 300 bytes at a time: \(lines)")
    }

    /// A stream id lower than one already used was ignored: RFC 9113
    /// section 5.1.1 makes it a connection error (PROTOCOL_ERROR).
    func testAStreamIdLowerThanOneUsedEndsTheConnection() throws {
        let (_, larder) = try start(config: "")
        let lines = try h2attacks(larder.port, ["lower-id", "/h2/lower-id?size=10"])
        XCTAssertEqual(lines.filter { $0.hasPrefix("STREAM") }, ["STREAM 5 200"], "\(lines)")
        XCTAssertTrue(lines.contains("RESULT goaway=1"), "\(lines)")
    }
}
