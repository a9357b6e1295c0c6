import XCTest
import CCurl
import Synchronization
@testable import Upstream
#if canImport(Glibc)
import Glibc
#endif

/// An upstream connection's socket when the process is out of
/// descriptors: what the daemon installed gives one back, and the socket
/// is opened on the second try.
final class DescriptorReliefTests: XCTestCase {
    private func openSocket() -> Int32 {
        var address = curl_sockaddr()
        address.family = AF_INET
        address.socktype = Int32(SOCK_STREAM.rawValue)
        address.protocol = 0
        return larder_open_socket(nil, CURLSOCKTYPE_IPCXN, &address)
    }

    func testOutOfDescriptorsTheReliefIsAskedAndTheSocketOpens() throws {
        var limit = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit), 0)
        defer { _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) }
        let spare = open("/dev/null", O_RDONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(spare, 0)
        let spareFD = Atomic<Int32>(spare)
        let asked = Atomic<Int>(0)
        DescriptorRelief.install {
            asked.add(1, ordering: .relaxed)
            let fd = spareFD.exchange(-1, ordering: .relaxed)
            guard fd >= 0 else { return 0 }
            close(fd)
            return 1
        }
        defer { DescriptorRelief.install { 0 } }
        // `open` gave the lowest free descriptor: with the limit just above
        // it, none is free below the limit and the next open fails (EMFILE).
        var tight = limit
        tight.rlim_cur = rlim_t(spare + 1)
        XCTAssertEqual(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &tight), 0)
        let socket = openSocket()
        XCTAssertEqual(socket, spare, "opened in the descriptor given back")
        XCTAssertEqual(asked.load(ordering: .relaxed), 1)
        let none = openSocket()
        XCTAssertEqual(none, CURL_SOCKET_BAD, "nothing more to give: the open fails as before")
        XCTAssertEqual(asked.load(ordering: .relaxed), 2)
        close(socket)
    }
}
