import EventLoop
import Foundation
import TLS
import Transport
import XCTest

/// The one byte stream under every protocol, plain and through TLS: reads,
/// the read loop's outcomes, writes, the TLS opening and the plain-text
/// sniff, shutdown. Real sockets (a pair, or a loopback TLS client).
final class ByteStreamTests: XCTestCase {
    override func setUp() { signal(SIGPIPE, SIG_IGN) }

    /// A connected pair of nonblocking sockets.
    private func socketPair() throws -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw SystemError(errno: errno, operation: "socketpair") }
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        return (fds[0], fds[1])
    }

    private func send(_ text: String, to fd: Int32) {
        let sent = Array(text.utf8).withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        XCTAssertEqual(sent, text.utf8.count)
    }

    func testAPlainStreamReadsWhatCameSaysWhenItWaitsAndWhenThePeerClosed() throws {
        let (ours, theirs) = try socketPair()
        defer { Glibc.close(theirs) }
        let stream = ByteStream(fd: ours)
        XCTAssertTrue(stream.isOpen)
        XCTAssertFalse(stream.isEncrypted)
        var scratch = [UInt8](repeating: 0, count: 4)
        var received = 0, got: [UInt8] = []
        XCTAssertEqual(stream.readAvailable(into: &scratch, rounds: 8, received: &received) { _ in }, .waiting,
                       "nothing came yet")
        send("hello world", to: theirs)
        XCTAssertEqual(stream.readAvailable(into: &scratch, rounds: 8, received: &received) { got += $0 }, .waiting)
        XCTAssertEqual(String(decoding: got, as: UTF8.self), "hello world", "read in pieces of the scratch's size")
        XCTAssertEqual(received, 11)

        send("more", to: theirs)
        var calls = 0
        _ = stream.readAvailable(into: &scratch, rounds: 8, received: &received, readMore: { false }) { _ in calls += 1 }
        XCTAssertEqual(calls, 1, "readMore says no: one read, not the rest of the bytes waiting")

        Glibc.shutdown(theirs, Int32(SHUT_WR))
        XCTAssertEqual(stream.readAvailable(into: &scratch, rounds: 8, received: &received) { _ in }, .ended)
        stream.close(notify: false)
    }

    func testAPlainStreamWritesWholeAndGatheredAndShutsItsSendingSide() throws {
        let (ours, theirs) = try socketPair()
        defer { Glibc.close(theirs) }
        let stream = ByteStream(fd: ours)
        let one = Array("head ".utf8), two = Array("body".utf8)
        let written = try one.withUnsafeBytes { a in
            try two.withUnsafeBytes { b in
                var iov = [iovec(iov_base: UnsafeMutableRawPointer(mutating: a.baseAddress), iov_len: a.count),
                           iovec(iov_base: UnsafeMutableRawPointer(mutating: b.baseAddress), iov_len: b.count)]
                return try iov.withUnsafeMutableBufferPointer { try stream.write(gathering: $0) }
            }
        }
        XCTAssertEqual(written, 9)
        XCTAssertEqual(try Array("!".utf8).withUnsafeBytes { try stream.write($0) }, 1)
        stream.shutdown()
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = Glibc.read(theirs, &buffer, 64)
        XCTAssertEqual(String(decoding: buffer[0..<max(n, 0)], as: UTF8.self), "head body!")
        XCTAssertEqual(Glibc.read(theirs, &buffer, 64), 0, "FIN after the shutdown")

        var lingering = Lingering(milliseconds: 100, maxBytes: 8)
        send("late", to: theirs)
        XCTAssertFalse(lingering.discard(stream, into: &buffer), "read and dropped; the client may send more")
        XCTAssertEqual(lingering.bytes, 4)
        send("over the bound", to: theirs)
        XCTAssertTrue(lingering.discard(stream, into: &buffer), "past maxBytes the close may come")
        stream.close(notify: false)
    }

    func testAReadOnAResetSocketFails() throws {
        let (ours, theirs) = try socketPair()
        let stream = ByteStream(fd: ours)
        Glibc.close(theirs)
        var scratch = [UInt8](repeating: 0, count: 16)
        var received = 0
        XCTAssertEqual(stream.readAvailable(into: &scratch, rounds: 2, received: &received) { _ in }, .ended)
        XCTAssertThrowsError(try Array("x".utf8).withUnsafeBytes { try stream.write($0) }, "the peer is gone (EPIPE)")
        stream.close(notify: false)
    }
}
