import XCTest
import CCurl
import TestSupport
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
        let spare = SpareDescriptor()
        DescriptorRelief.install { spare.relieve() }
        defer { DescriptorRelief.install { 0 } }
        let sockets = try XCTUnwrap(spare.withTightLimit { (openSocket(), openSocket()) })
        XCTAssertEqual(sockets.0, spare.number, "opened in the descriptor given back")
        XCTAssertEqual(sockets.1, CURL_SOCKET_BAD, "nothing more to give: the open fails as before")
        XCTAssertEqual(spare.asked.load(ordering: .relaxed), 2)
        close(sockets.0)
    }
}
