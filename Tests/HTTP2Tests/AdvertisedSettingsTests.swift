import XCTest
@testable import HTTP2

/// The session's first SETTINGS frame tells the client the real stream
/// limit while the library keeps a higher, hard one.
final class AdvertisedSettingsTests: XCTestCase {
    private func frame(type: UInt8, flags: UInt8, payload: [UInt8]) -> [UInt8] {
        [UInt8(payload.count >> 16), UInt8((payload.count >> 8) & 0xFF), UInt8(payload.count & 0xFF), type, flags, 0, 0, 0, 0] + payload
    }

    private func entry(_ id: UInt16, _ value: UInt32) -> [UInt8] {
        [UInt8(id >> 8), UInt8(id & 0xFF), UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    func testTheFirstSettingsFrameCarriesTheAdvertisedLimit() {
        let ack = frame(type: 0x4, flags: 0x1, payload: [])
        let settings = frame(type: 0x4, flags: 0, payload: entry(0x3, 228) + entry(0x4, 1 << 20) + entry(0x6, 32768))
        let ping = frame(type: 0x6, flags: 0, payload: [UInt8](repeating: 7, count: 8))
        var bytes = ack + settings + ping
        XCTAssertTrue(AdvertisedSettings.rewrite(&bytes, maxConcurrentStreams: 100))
        XCTAssertEqual(bytes, ack + frame(type: 0x4, flags: 0, payload: entry(0x3, 100) + entry(0x4, 1 << 20) + entry(0x6, 32768)) + ping,
                       "only the limit's value changes; the ACK before it and the frame after it are untouched")
    }

    func testBytesWithoutASettingsFrameAreLeftAsTheyAre() {
        let ping = frame(type: 0x6, flags: 0, payload: [UInt8](repeating: 7, count: 8))
        var bytes = ping
        XCTAssertFalse(AdvertisedSettings.rewrite(&bytes, maxConcurrentStreams: 100))
        XCTAssertEqual(bytes, ping)
        var cut = Array(frame(type: 0x4, flags: 0, payload: entry(0x3, 228)).dropLast(2))
        let before = cut
        XCTAssertFalse(AdvertisedSettings.rewrite(&cut, maxConcurrentStreams: 100), "a frame cut short is not read")
        XCTAssertEqual(cut, before)
    }

    func testTheLibrarysBoundLeavesRoomToRefuseStreamsOneByOne() {
        XCTAssertEqual(AdvertisedSettings.hardBound(100), 228)
        XCTAssertEqual(AdvertisedSettings.hardBound(1000), 2000)
        XCTAssertGreaterThan(AdvertisedSettings.hardBound(1), 1)
    }
}
