import EdgeControls
import XCTest

final class AddressTests: XCTestCase {
    func testPrefixesOfBothFamilies() throws {
        let list = try AddressList.parse(["127.0.0.0/8", "::1/128", "10.1.2.3", "2001:db8::/32"]).get()
        XCTAssertTrue(list.contains(IPAddress("127.0.0.2")!))
        XCTAssertTrue(list.contains(IPAddress("127.255.0.9")!))
        XCTAssertFalse(list.contains(IPAddress("128.0.0.1")!))
        XCTAssertTrue(list.contains(IPAddress("::1")!))
        XCTAssertFalse(list.contains(IPAddress("::2")!))
        XCTAssertTrue(list.contains(IPAddress("10.1.2.3")!))
        XCTAssertFalse(list.contains(IPAddress("10.1.2.4")!))
        XCTAssertTrue(list.contains(IPAddress("2001:db8:ffff::7")!))
        XCTAssertFalse(list.contains(IPAddress("2001:db9::1")!))
        // A dual-stack socket's mapped peer is its IPv4 address.
        XCTAssertTrue(list.contains(IPAddress("::ffff:127.0.0.5")!))
        XCTAssertEqual(IPAddress("::ffff:127.0.0.5"), IPAddress("127.0.0.5"))
    }

    func testZeroLengthPrefixesMatchTheirFamily() throws {
        let v4 = try AddressList.parse(["0.0.0.0/0"]).get(), v6 = try AddressList.parse(["::/0"]).get()
        XCTAssertTrue(v4.contains(IPAddress("203.0.113.9")!))
        XCTAssertFalse(v4.contains(IPAddress("2001:db8::1")!))
        XCTAssertTrue(v6.contains(IPAddress("2001:db8::1")!))
    }

    func testBadEntriesAreNamed() {
        for bad in ["", "localhost", "10.0.0.0/33", "10.0.0.1/8", "::1/129", "10.0.0.0/", "10.0.0.0/-1", "1.2.3", "[::1]", "10.0.0.0/8/8"] {
            guard case .failure(let problem) = AddressList.parse(["127.0.0.1", bad]) else { return XCTFail("accepted \(bad)") }
            XCTAssertEqual(problem.entry, bad)
        }
    }

    func testDenyFirstThenAllow() throws {
        let access = AccessList(allow: try AddressList.parse(["127.0.0.0/8"]).get(), deny: try AddressList.parse(["127.0.0.2"]).get())
        XCTAssertTrue(access.admits(IPAddress("127.0.0.3")!))
        XCTAssertFalse(access.admits(IPAddress("127.0.0.2")!))
        XCTAssertFalse(access.admits(IPAddress("192.0.2.1")!))
        let denyOnly = AccessList(deny: try AddressList.parse(["127.0.0.2"]).get())
        XCTAssertTrue(denyOnly.admits(IPAddress("192.0.2.1")!))
        XCTAssertFalse(denyOnly.admits(IPAddress("127.0.0.2")!))
        XCTAssertTrue(AccessList().admits(IPAddress("192.0.2.1")!))
    }

    func testForwardedForCountsOnlyFromATrustedProxy() throws {
        let trusted = try AddressList.parse(["127.0.0.1", "10.0.0.0/8"]).get()
        let proxy = IPAddress("127.0.0.1")!, stranger = IPAddress("127.0.0.9")!
        XCTAssertEqual(ClientAddress.resolve(socket: stranger, trusted: trusted, forwardedFor: "192.0.2.7", forwarded: nil), stranger)
        XCTAssertEqual(ClientAddress.resolve(socket: proxy, trusted: nil, forwardedFor: "192.0.2.7", forwarded: nil), proxy)
        XCTAssertEqual(ClientAddress.resolve(socket: proxy, trusted: trusted, forwardedFor: "192.0.2.7", forwarded: nil), IPAddress("192.0.2.7"))
        // From the right: a client's own claim to the left of the first untrusted hop is ignored.
        XCTAssertEqual(ClientAddress.resolve(socket: proxy, trusted: trusted, forwardedFor: "127.0.0.2, 198.51.100.4, 10.0.0.3",
                                             forwarded: nil), IPAddress("198.51.100.4"))
        // Garbage stops the walk at the last good hop.
        XCTAssertEqual(ClientAddress.resolve(socket: proxy, trusted: trusted, forwardedFor: "198.51.100.4, unknown", forwarded: nil), proxy)
        XCTAssertEqual(ClientAddress.resolve(socket: proxy, trusted: trusted, forwardedFor: nil,
                                             forwarded: "for=192.0.2.60;proto=http, for=\"[2001:db8:cafe::17]:4711\""),
                       IPAddress("2001:db8:cafe::17"))
        XCTAssertEqual(ClientAddress.resolve(socket: proxy, trusted: trusted, forwardedFor: nil, forwarded: "for=192.0.2.43:8080"),
                       IPAddress("192.0.2.43"))
        XCTAssertEqual(ClientAddress.resolve(socket: proxy, trusted: trusted, forwardedFor: nil, forwarded: "for=_hidden"), proxy)
    }

    func testAddressesPrintAsTheyAreWritten() {
        XCTAssertEqual(IPAddress("127.0.0.2")!.description, "127.0.0.2")
        XCTAssertEqual(IPAddress("2001:DB8::1")!.description, "2001:db8::1")
        XCTAssertEqual(AddressPrefix("10.0.0.0/8")!.description, "10.0.0.0/8")
    }
}
