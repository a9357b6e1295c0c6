import Foundation
import XCTest

/// A figure from the admin API's /stats.
func statsFigure(_ larder: LarderProcess, _ name: String) throws -> Int {
    let r = try larder.adminClient().get("/stats")
    let json = try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]
    return json?[name] as? Int ?? -1
}

/// Waits (bounded) until a /stats figure reaches `value`; returns the last reading.
func waitForStats(_ larder: LarderProcess, _ name: String, atLeast value: Int, timeout: TimeInterval = 10) throws -> Int {
    let deadline = Date().addingTimeInterval(timeout)
    var figure = try statsFigure(larder, name)
    while figure < value && Date() < deadline {
        usleep(20_000)
        figure = try statsFigure(larder, name)
    }
    return figure
}

/// Waits (bounded) until a /stats figure falls to `value`; returns the last reading.
func waitForStats(_ larder: LarderProcess, _ name: String, atMost value: Int, timeout: TimeInterval = 10) throws -> Int {
    let deadline = Date().addingTimeInterval(timeout)
    var figure = try statsFigure(larder, name)
    while figure > value && Date() < deadline {
        usleep(20_000)
        figure = try statsFigure(larder, name)
    }
    return figure
}
