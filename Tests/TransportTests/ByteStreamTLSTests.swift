import EventLoop
import Foundation
import TLS
import Transport
import XCTest

/// The byte stream through TLS: a handshake with a real client (Python's
/// ssl module), bytes both ways decrypted and encrypted, close_notify; a
/// client that speaks plain text to the TLS port is told apart.
final class ByteStreamTLSTests: XCTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        signal(SIGPIPE, SIG_IGN)
        try TLSContext.loadLibrary()
        dir = NSTemporaryDirectory() + "bytestream-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    /// A TLS context with a fresh self-signed certificate for "localhost".
    private func context() throws -> TLSContext {
        let (pem, key) = ("\(dir)/cert.pem", "\(dir)/cert.key")
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                             "-out", pem, "-days", "2", "-subj", "/CN=localhost"]
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        XCTAssertEqual(openssl.terminationStatus, 0, "openssl req")
        return try TLSContext(certificates: [TLSCertificate(chain: pem, key: key)])
    }

    /// Waits (bounded) until `fd` is readable or writable as asked.
    private func wait(_ fd: Int32, write: Bool) throws {
        var entry = pollfd(fd: fd, events: Int16(write ? POLLOUT : POLLIN), revents: 0)
        guard poll(&entry, 1, 10_000) > 0 else { throw SystemError(errno: ETIMEDOUT, operation: "poll (10 s)") }
    }

    func testBytesGoBothWaysThroughTLSWithARealClient() throws {
        let tls = try context()
        let (listener, port) = try Socket.listen(host: "127.0.0.1", port: 0, reusePort: false)
        defer { Socket.close(listener) }
        let script = """
            import socket, ssl, sys
            c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
            s = c.wrap_socket(socket.create_connection(("127.0.0.1", \(port)), timeout=10), server_hostname="localhost")
            s.sendall(b"ping")
            got = b""
            while len(got) < 4:
                piece = s.recv(4 - len(got))
                if not piece: break
                got += piece
            sys.stdout.write(got.decode() + " " + s.version())
            """
        let client = Process()
        client.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        client.arguments = ["-c", script]
        let out = Pipe()
        client.standardOutput = out
        try client.run()
        defer { if client.isRunning { client.terminate() } }

        var accepted: (fd: Int32, peer: String)?
        for _ in 0..<100 where accepted == nil {
            try wait(listener, write: false)
            accepted = try Socket.accept(listener)
        }
        let fd = try XCTUnwrap(accepted).fd
        var stream = ByteStream(fd: fd, tls: try XCTUnwrap(TLSSession(context: tls, fd: fd)))
        XCTAssertTrue(stream.isEncrypted)
        XCTAssertFalse(stream.isOpen, "the handshake comes first")
        var opening = stream.open()
        for _ in 0..<100 where opening == .wantRead || opening == .wantWrite {
            try wait(fd, write: opening == .wantWrite)
            opening = stream.open()
        }
        XCTAssertEqual(opening, .open)
        XCTAssertTrue(stream.isOpen)

        var scratch = [UInt8](repeating: 0, count: 1024)
        var received = 0, got: [UInt8] = []
        for _ in 0..<100 where got.count < 4 {
            try wait(fd, write: stream.wantsWrite)
            let reads = stream.readAvailable(into: &scratch, rounds: 4, received: &received) { got += $0 }
            XCTAssertEqual(reads, .waiting)
        }
        XCTAssertEqual(String(decoding: got, as: UTF8.self), "ping", "decrypted")
        XCTAssertEqual(received, 4)

        var sent = 0
        for _ in 0..<100 where sent == 0 {
            sent = try Array("pong".utf8).withUnsafeBytes { try stream.write($0) } ?? 0
            if sent == 0 { try wait(fd, write: true) }
        }
        XCTAssertEqual(sent, 4)
        client.waitUntilExit()
        let answer = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(answer.hasPrefix("pong TLSv1."), answer)
        stream.close(notify: true)
    }

    func testPlainTextToATLSPortIsToldApartAndAClosedClientIsSeen() throws {
        let tls = try context()
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        var stream = ByteStream(fd: fds[0], tls: try XCTUnwrap(TLSSession(context: tls, fd: fds[0])))
        XCTAssertEqual(stream.open(), .wantRead, "nothing came yet")
        _ = Array("GET / HTTP/1.1\r\n".utf8).withUnsafeBytes { Glibc.write(fds[1], $0.baseAddress, $0.count) }
        XCTAssertEqual(stream.open(), .plainText)
        XCTAssertFalse(stream.isEncrypted, "plain from now on, for the answer that says so")
        XCTAssertEqual(stream.open(), .open)
        var scratch = [UInt8](repeating: 0, count: 64)
        var received = 0, got: [UInt8] = []
        _ = stream.readAvailable(into: &scratch, rounds: 1, received: &received) { got += $0 }
        XCTAssertEqual(String(decoding: got, as: UTF8.self), "GET / HTTP/1.1\r\n", "the plain bytes, unread by TLS")
        stream.close(notify: false)
        Glibc.close(fds[1])

        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        var closing = ByteStream(fd: fds[0], tls: try XCTUnwrap(TLSSession(context: tls, fd: fds[0])))
        Glibc.close(fds[1])
        XCTAssertEqual(closing.open(), .closed, "the client left before its handshake")
        closing.close(notify: false)
    }
}
