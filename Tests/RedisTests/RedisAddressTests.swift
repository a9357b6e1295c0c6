import Redis
import XCTest

/// The `redis` setting: every accepted form, a clear error for each kind
/// of bad one, and which addresses only this machine can reach.
final class RedisAddressTests: XCTestCase {
    private func parse(_ text: String) throws -> RedisAddress { try RedisAddress(parsing: text) }

    private func error(_ text: String) -> String {
        do {
            _ = try parse(text)
            return "accepted"
        } catch {
            return String(describing: error)
        }
    }

    func testTheAcceptedForms() throws {
        XCTAssertEqual(try parse("redis://127.0.0.1"), RedisAddress(endpoint: .tcp(host: "127.0.0.1", port: 6379)))
        XCTAssertEqual(try parse("redis://10.0.0.5:6380/2"), RedisAddress(endpoint: .tcp(host: "10.0.0.5", port: 6380), database: 2))
        XCTAssertEqual(try parse("redis://[::1]:7000/"), RedisAddress(endpoint: .tcp(host: "::1", port: 7000)))
        XCTAssertEqual(try parse("redis://cache.internal"), RedisAddress(endpoint: .tcp(host: "cache.internal", port: 6379)))
        XCTAssertEqual(try parse("unix:/run/redis/redis.sock"), RedisAddress(endpoint: .unix(path: "/run/redis/redis.sock")))
        XCTAssertEqual(try parse("unix:///run/redis.sock"), RedisAddress(endpoint: .unix(path: "/run/redis.sock")))
        XCTAssertEqual(try parse("redis://[::1]:7000/3").description, "redis://[::1]:7000/3")
        let tls = try parse("rediss://cache.internal:6380/1")
        XCTAssertTrue(tls.tls)
        XCTAssertEqual(tls.description, "rediss://cache.internal:6380/1")
        XCTAssertEqual(tls.serverName, "cache.internal")
        XCTAssertFalse(try parse("redis://cache.internal").tls)
    }

    func testEachKindOfBadAddressIsNamed() {
        XCTAssertTrue(error("http://127.0.0.1").contains("unknown scheme"))
        XCTAssertTrue(error("127.0.0.1:6379").contains("unknown scheme"))
        XCTAssertTrue(error("redis://:pw@127.0.0.1").contains("password_file"), "a password in the address would reach logs")
        XCTAssertTrue(error("redis://").contains("no host"))
        XCTAssertTrue(error("redis://127.0.0.1:0").contains("port"))
        XCTAssertTrue(error("redis://127.0.0.1:99999").contains("port"))
        XCTAssertTrue(error("redis://127.0.0.1:abc").contains("port"))
        XCTAssertTrue(error("redis://127.0.0.1/x").contains("database"))
        XCTAssertTrue(error("redis://127.0.0.1/-1").contains("database"))
        XCTAssertTrue(error("redis://[::1").contains("unclosed"))
        XCTAssertTrue(error("redis://[::1]x").contains("after the host"))
        XCTAssertTrue(error("unix:relative.sock").contains("absolute path"))
        XCTAssertTrue(error("unix:").contains("absolute path"))
        XCTAssertTrue(error("ftp://x").contains("redis://HOST[:PORT][/DB], rediss://... or unix:/PATH"), "the error shows the expected form")
    }

    func testOnlyLoopbackAndUnixSocketsAreLocal() throws {
        XCTAssertTrue(try parse("redis://127.0.0.1").isLocal)
        XCTAssertTrue(try parse("redis://127.8.0.1").isLocal)
        XCTAssertTrue(try parse("redis://[::1]").isLocal)
        XCTAssertTrue(try parse("redis://localhost").isLocal)
        XCTAssertTrue(try parse("unix:/run/redis.sock").isLocal)
        XCTAssertFalse(try parse("redis://10.0.0.5").isLocal)
        XCTAssertFalse(try parse("redis://127.0.0.1.evil.example").isLocal, "a name that starts like loopback is not")
    }

    func testAHostNameIsResolvedOnceToANumericAddress() throws {
        let local = try parse("redis://localhost:7000/2").resolved()
        guard case .tcp(let host, let port) = local.endpoint else { return XCTFail("still tcp") }
        XCTAssertTrue(host == "127.0.0.1" || host == "::1", host)
        XCTAssertEqual(port, 7000)
        XCTAssertEqual(local.database, 2)
        XCTAssertEqual(try parse("redis://10.0.0.5").resolved(), try parse("redis://10.0.0.5"))
        XCTAssertEqual(try parse("unix:/run/redis.sock").resolved(), try parse("unix:/run/redis.sock"))
    }

    /// Only a TCP host that is not a numeric address asks a name server
    /// (done on an I/O thread before each connect, never on a loop).
    func testOnlyHostNamesNeedALookup() throws {
        XCTAssertTrue(try parse("redis://localhost:6379").needsLookup)
        XCTAssertTrue(try parse("redis://cache.internal").needsLookup)
        XCTAssertFalse(try parse("redis://127.0.0.1:6379").needsLookup)
        XCTAssertFalse(try parse("redis://[::1]:6379").needsLookup)
        XCTAssertFalse(try parse("unix:/run/redis.sock").needsLookup)
        XCTAssertFalse(try parse("redis://localhost:6379").resolved().needsLookup, "resolved, it is numeric")
    }
}
