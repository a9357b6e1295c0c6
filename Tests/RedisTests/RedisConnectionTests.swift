import EventLoop
import Foundation
import Redis
import TestSupport
import TLS
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The asynchronous Redis connection on Larder's loop, against a real
/// redis-server: replies of every type, AUTH and SELECT, and each way it
/// fails (nothing listening, a refused password, a server that never
/// answers or speaks another protocol, one killed mid-command, a reply
/// overdue), always as an error to every waiting command, never a hang.
final class RedisConnectionTests: XCTestCase {
    private var loop: EventLoop!
    private var connections: [RedisConnection] = []

    override func setUpWithError() throws {
        loop = try EventLoop()
    }

    override func tearDown() {
        connections.forEach { $0.close() }
        connections = []
        for _ in 0..<3 { loop.runOnce(maxWaitMilliseconds: 0) }
        loop = nil
    }

    private func connect(_ address: String, password: String? = nil, commandTimeout: UInt64 = 2_000) throws -> RedisConnection {
        let connection = RedisConnection(try RedisAddress(parsing: address), password: password, loop: loop,
                                         connectTimeoutMilliseconds: 1_000, commandTimeoutMilliseconds: commandTimeout)
        connections.append(connection)
        return connection
    }

    /// Runs the loop until `done` (bounded: 10 s).
    private func run(until done: () -> Bool) {
        let deadline = Date().addingTimeInterval(10)
        while !done() && Date() < deadline { loop.runOnce(maxWaitMilliseconds: 20) }
    }

    /// Sends `arguments` and waits for the outcome.
    private func call(_ connection: RedisConnection, _ arguments: [String], timeout: UInt64? = nil) -> Result<RedisReply, RedisError>? {
        var outcome: Result<RedisReply, RedisError>?
        connection.send(arguments, timeoutMilliseconds: timeout) { outcome = $0 }
        run { outcome != nil }
        return outcome
    }

    func testRepliesOfEveryTypeComeBackAsSent() throws {
        let server = try RedisServer()
        let redis = try connect("redis://127.0.0.1:\(server.port)")
        var ready = false
        redis.onReady = { ready = true }
        let binary: [UInt8] = [0, 13, 10, 255, 36]
        var replies: [Result<RedisReply, RedisError>] = []
        redis.send([Array("SET".utf8), Array("b".utf8), binary]) { replies.append($0) }
        redis.send(["GET", "b"]) { replies.append($0) }
        redis.send(["GET", "missing"]) { replies.append($0) }
        redis.send(["INCRBY", "n", "41"]) { replies.append($0) }
        redis.send(["RPUSH", "list", "x", "y"]) { replies.append($0) }
        redis.send(["LRANGE", "list", "0", "-1"]) { replies.append($0) }
        redis.send(["INCR", "list"]) { replies.append($0) }
        run { replies.count == 7 }
        XCTAssertTrue(ready)
        XCTAssertEqual(replies.map { try? $0.get() }, [
            .status("OK"), .string(binary), .null, .integer(41), .integer(2), .array([.string(Array("x".utf8)), .string(Array("y".utf8))]),
            .error("WRONGTYPE Operation against a key holding the wrong kind of value"),
        ], "binary-safe, in order, and an error reply leaves the connection usable")
        XCTAssertEqual(try call(redis, ["PING"])?.get(), .status("PONG"))
    }

    /// `requireMaster`: ready on a master; a replica is refused as one
    /// (`isNotMaster`), and its READONLY to a write is told apart.
    func testAConnectionThatNeedsAMasterRefusesAReplica() throws {
        let master = try RedisServer()
        let replica = try RedisServer(extra: ["--replicaof", "127.0.0.1", String(master.port)])
        func open(_ port: Int) -> RedisConnection {
            let connection = RedisConnection(RedisAddress(endpoint: .tcp(host: "127.0.0.1", port: port)), password: nil, loop: loop,
                                             connectTimeoutMilliseconds: 1_000, commandTimeoutMilliseconds: 2_000, requireMaster: true)
            connections.append(connection)
            return connection
        }
        let toMaster = open(master.port)
        var ready = false
        toMaster.onReady = { ready = true }
        run { ready }
        XCTAssertTrue(ready)

        let toReplica = open(replica.port)
        var closed: RedisError?
        toReplica.onReady = { XCTFail("a replica is not ready as a master") }
        toReplica.onClosed = { closed = $0 }
        run { closed != nil }
        XCTAssertEqual(closed?.isNotMaster, true, "\(String(describing: closed))")
        XCTAssertTrue(closed?.description.contains("is a slave, not the master") ?? false, "\(String(describing: closed))")

        let plain = try connect("redis://127.0.0.1:\(replica.port)")
        let write = try call(plain, ["SET", "k", "v"])?.get()
        XCTAssertEqual(write?.isReadOnlyError, true, "\(String(describing: write))")
        XCTAssertEqual(try call(plain, ["GET", "k"])?.get().isReadOnlyError, false)
    }

    /// `rediss://`: the commands go through TLS to a server whose
    /// certificate names the address; one no authority vouches for, or for
    /// another address, is refused with the reason, never a hang.
    func testTLSToAServerWhoseCertificateVerifies() throws {
        let dir = NSTemporaryDirectory() + "larder-redis-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certificate = try selfSignedCertificate(in: dir, names: "IP:127.0.0.1,DNS:localhost")
        let server = try RedisServer(tls: certificate)
        let port = try XCTUnwrap(server.tlsPort)
        func open(_ name: String, ca: String?) throws -> RedisConnection {
            let address = RedisAddress(endpoint: .tcp(host: "127.0.0.1", port: port), tls: true, serverName: name)
            let connection = RedisConnection(address, password: nil, loop: loop, connectTimeoutMilliseconds: 2_000,
                                             commandTimeoutMilliseconds: 2_000, tls: try TLSClientContext.verifying(caFile: ca))
            connections.append(connection)
            return connection
        }
        let redis = try open("127.0.0.1", ca: certificate.cert)
        var ready = false
        redis.onReady = { ready = true }
        let big = [UInt8](repeating: 0x61, count: 200_000)
        XCTAssertEqual(try call(redis, ["SET", "k", String(decoding: big, as: UTF8.self)])?.get(), .status("OK"))
        XCTAssertEqual(try call(redis, ["GET", "k"])?.get(), .string(big), "a large reply through TLS, whole")
        XCTAssertTrue(ready)

        XCTAssertEqual(try call(try open("localhost", ca: certificate.cert), ["PING"])?.get(), .status("PONG"), "a name it shows")
        for (name, ca, why) in [("127.0.0.1", nil as String?, "self-signed certificate"),
                                ("elsewhere.test", certificate.cert, "hostname mismatch")] {
            let refused = try open(name, ca: ca)
            var closed: RedisError?
            refused.onClosed = { closed = $0 }
            run { closed != nil }
            XCTAssertTrue(closed?.description.contains(why) ?? false, "\(name): \(String(describing: closed))")
        }
        // A plain connection to the TLS port: an error, in bounded time.
        let plain = try connect("redis://127.0.0.1:\(port)", commandTimeout: 500)
        if case .success(let reply) = try XCTUnwrap(call(plain, ["PING"])) { XCTFail("a plain PING answered through TLS: \(reply)") }
    }

    /// Out of descriptors (the limit just above those open), the relief the
    /// daemon installs is asked and the connection made in the one it gives back.
    func testOutOfDescriptorsTheReliefIsAskedAndTheConnectionIsMade() throws {
        let server = try RedisServer()
        let spare = SpareDescriptor()
        RedisConnection.installDescriptorRelief { spare.relieve() }
        defer { RedisConnection.installDescriptorRelief { 0 } }
        let redis = try XCTUnwrap(try spare.withTightLimit { try connect("redis://127.0.0.1:\(server.port)") })
        XCTAssertEqual(spare.asked.load(ordering: .relaxed), 1)
        XCTAssertEqual(try call(redis, ["PING"])?.get(), .status("PONG"), "connected in the descriptor given back")
    }

    func testTheDatabaseInTheAddressIsSelectedAndAUnixSocketWorks() throws {
        let server = try RedisServer()
        let three = try connect("redis://127.0.0.1:\(server.port)/3")
        XCTAssertEqual(try call(three, ["SET", "k", "in three"])?.get(), .status("OK"))
        let zero = try connect("unix:\(server.socketPath)")
        XCTAssertEqual(try call(zero, ["GET", "k"])?.get(), .null, "database 0 does not see database 3's key")
        XCTAssertEqual(try call(zero, ["SELECT", "3"])?.get(), .status("OK"))
        XCTAssertEqual(try call(zero, ["GET", "k"])?.get().text, "in three")
    }

    func testTheRightPasswordIsAcceptedAndAWrongOneClosesTheConnectionWithAClearError() throws {
        let server = try RedisServer(extra: ["--requirepass", "s3cret"])
        let good = try connect("redis://127.0.0.1:\(server.port)", password: "s3cret")
        XCTAssertEqual(try call(good, ["PING"])?.get(), .status("PONG"))

        let bad = try connect("redis://127.0.0.1:\(server.port)", password: "wrong")
        var closed: RedisError?
        bad.onClosed = { closed = $0 }
        guard case .failure(let error) = call(bad, ["GET", "k"]) else { return XCTFail("a command behind a refused AUTH fails") }
        XCTAssertTrue(error.description.contains("refused AUTH"), error.description)
        XCTAssertEqual(closed, error, "the owner hears why")
        XCTAssertFalse(bad.isReady)

        let none = try connect("redis://127.0.0.1:\(server.port)")
        var noneClosed: RedisError?
        none.onClosed = { noneClosed = $0 }
        run { noneClosed != nil }
        XCTAssertTrue(noneClosed?.description.contains("NOAUTH") ?? false, "no password for a server that wants one: \(String(describing: noneClosed))")
    }

    func testNothingListeningFailsEveryWaitingCommand() throws {
        let redis = try connect("redis://127.0.0.1:\(unusedPort())")
        var closed: RedisError?
        redis.onClosed = { closed = $0 }
        guard case .failure(let error) = call(redis, ["PING"]) else { return XCTFail("nothing listens") }
        XCTAssertTrue(error.description.contains("cannot connect"), error.description)
        run { closed != nil }
        XCTAssertNotNil(closed)
        guard case .failure = call(redis, ["PING"]) else { return XCTFail("a closed connection refuses further commands") }
    }

    func testAServerThatNeverAnswersOrSpeaksAnotherProtocolIsGivenUp() throws {
        // A listener that accepts and says nothing: the connect timeout ends it.
        let silent = try Listener()
        let quiet = try connect("redis://127.0.0.1:\(silent.port)")
        guard case .failure(let timedOut) = call(quiet, ["PING"]) else { return XCTFail("no answer") }
        XCTAssertTrue(timedOut.description.contains("no answer within"), timedOut.description)

        // One that answers as an HTTP server would.
        let http = try Listener(answer: "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        let confused = try connect("redis://127.0.0.1:\(http.port)")
        guard case .failure(let protocolError) = call(confused, ["PING"]) else { return XCTFail("not Redis") }
        XCTAssertTrue(protocolError.description.contains("Protocol error"), protocolError.description)
        withExtendedLifetime((silent, http)) {}
    }

    func testAServerKilledMidCommandAndAnOverdueReplyFailTheirCommands() throws {
        let server = try RedisServer()
        let redis = try connect("redis://127.0.0.1:\(server.port)")
        XCTAssertEqual(try call(redis, ["PING"])?.get(), .status("PONG"))
        var blocked: Result<RedisReply, RedisError>?
        redis.send(["BLPOP", "never", "0"], timeoutMilliseconds: 60_000) { blocked = $0 }
        var closed: RedisError?
        redis.onClosed = { closed = $0 }
        let watcher = try connect("redis://127.0.0.1:\(server.port)")
        var serverSeesItBlocked = false
        for _ in 0..<100 where !serverSeesItBlocked {
            serverSeesItBlocked = (try? call(watcher, ["INFO", "clients"])?.get().text)??.contains("blocked_clients:1") ?? false
        }
        XCTAssertTrue(serverSeesItBlocked, "the command reached the server")
        server.stop()
        run { blocked != nil && closed != nil }
        guard case .failure(let gone) = blocked else { return XCTFail("the waiting command fails when the server goes") }
        XCTAssertTrue(gone.description.contains("closed"), gone.description)
        XCTAssertEqual(closed, gone)

        let second = try RedisServer()
        let slow = try connect("redis://127.0.0.1:\(second.port)", commandTimeout: 200)
        guard case .failure(let overdue) = call(slow, ["BLPOP", "never", "5"]) else { return XCTFail("overdue") }
        XCTAssertTrue(overdue.description.contains("did not answer within 200 ms"), overdue.description)
        XCTAssertEqual(try call(try connect("redis://127.0.0.1:\(second.port)"), ["PING"])?.get(), .status("PONG"),
                       "the server is fine: only that connection was given up")
    }
}

/// A loopback listener that accepts one connection and writes `answer`
/// (or nothing) to it; closed at deinit.
final class Listener {
    let port: Int
    private let fd: Int32
    private var thread: Thread?

    init(answer: String? = nil) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok, listen(fd, 4) == 0 else {
            close(fd)
            throw RedisTestError("cannot listen")
        }
        port = Int(UInt16(bigEndian: addr.sin_port))
        guard let answer else { return }
        let listening = fd
        let thread = Thread {
            let client = accept(listening, nil, nil)
            guard client >= 0 else { return }
            _ = answer.withCString { write(client, $0, strlen($0)) }
            // Reads until the other side closes (or the listener goes).
            var buffer = [UInt8](repeating: 0, count: 512)
            while read(client, &buffer, buffer.count) > 0 {}
            close(client)
        }
        thread.start()
        self.thread = thread
    }

    deinit {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}
