import CacheSemantics
import HTTP1
import HTTPHeaders
import Routing

/// An HTTP/1.1 protocol upgrade (RFC 9110 section 7.8; WebSocket, RFC
/// 6455) as Larder tunnels it: which requests ask for one, the request the
/// upstream gets, what its answer's head says. Pure: tested without sockets.
enum Upgrade {
    /// The protocols a request asks to switch to: an Upgrade field that
    /// Connection nominates, in an HTTP/1.1 request without a body. nil
    /// for every other request, and for h2c (HTTP/2's own upgrade, never
    /// passed on: a client may use prior knowledge instead).
    static func requested(_ head: RequestHead) -> String? {
        guard head.minorVersion == 1, head.framing == .none, let upgrade = head.combinedHeader("upgrade"),
              HopByHop.nominated(by: head.headers).contains("upgrade") else { return nil }
        let protocols = upgrade.split(separator: ",").map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }
        guard !protocols.isEmpty, !protocols.contains(where: { $0.lowercased().hasPrefix("h2c") }) else { return nil }
        return protocols.joined(separator: ", ")
    }

    /// The request's route, its virtual hosts counted (its `websocket`, its pool).
    static func route(of head: RequestHead, in routes: RouteTable) -> Route? {
        routes.match(routes.cacheKey(head.pathAndQuery, host: head.header("host")), method: head.method)
    }

    /// The upstream request as bytes: the client's request line, its
    /// fields as every forwarded request's (`forwarded`: no hop-by-hop
    /// ones), `host` (the client's with preserve_host, else the server's)
    /// and the upgrade's own Upgrade and Connection.
    static func upstreamRequest(_ head: RequestHead, forwarded: HeaderFields, host: String, upgrade: String) -> [UInt8] {
        var text = "\(head.method) \(head.target) HTTP/1.1\r\n"
        if !forwarded.contains(where: { $0.name == "host" }) { text += "Host: \(host)\r\n" }
        for field in forwarded { text += "\(field.name): \(field.value)\r\n" }
        text += "Upgrade: \(upgrade)\r\nConnection: Upgrade\r\n\r\n"
        return Array(text.utf8)
    }

    /// The most bytes an upstream's answer head may take.
    static let maxHeadBytes = 64 << 10

    enum ResponseHead: Equatable {
        case incomplete
        case invalid(String)
        /// `headLength`: the head's bytes (its blank line included);
        /// `bodyLength`: what a non-101 answer's Content-Length says (nil:
        /// none, or not one number: the answer ends when the upstream closes).
        case complete(status: Int, headLength: Int, bodyLength: Int?)
    }

    /// The upstream's answer head at the start of `bytes`.
    static func responseHead(_ bytes: ArraySlice<UInt8>) -> ResponseHead {
        guard let end = headEnd(bytes) else {
            return bytes.count > maxHeadBytes ? .invalid("the upstream's answer head is over 64 KiB") : .incomplete
        }
        let head = String(decoding: bytes[bytes.startIndex..<end], as: UTF8.self)
        let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines.first ?? ""
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].utf8.count == 3, let status = Int(parts[1]),
              status >= 100 else {
            return .invalid("the upstream did not answer with an HTTP/1.1 status line")
        }
        var length: Int?
        if status != 101 {
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == "content-length" else { continue }
                let value = line[line.index(after: colon)...].trimmingWhitespace()
                guard let n = Int(value), n >= 0, length == nil || length == n else { return .invalid("a bad Content-Length") }
                length = n
            }
        }
        return .complete(status: status, headLength: end - bytes.startIndex + 4, bodyLength: length)
    }

    /// Where the head's blank line begins (nil: not yet).
    private static func headEnd(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var i = bytes.startIndex
        while i + 3 < bytes.endIndex {
            if bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 { return i }
            i += 1
        }
        return nil
    }
}
