import HTTPHeaders

/// The outcome of feeding bytes to the request parser.
public enum ParseResult: Equatable, Sendable {
    /// A whole head was parsed; `consumed` bytes belong to it.
    case complete(RequestHead, consumed: Int)
    /// More bytes are needed.
    case incomplete
    /// The input can never become a valid request.
    case invalid(HTTPError)
}

/// A strict, bounded, incremental HTTP/1.1 request-head parser.
///
/// Feed it the whole unconsumed input each time more bytes arrive; it
/// remembers how far it has already searched for the end of the head, so
/// input that trickles in byte by byte costs linear time overall.
public struct RequestParser: Sendable {
    public let limits: ParseLimits
    private var scanned = 0

    public init(limits: ParseLimits = ParseLimits()) {
        self.limits = limits
    }

    /// Forget the scan position (call after consuming a head).
    public mutating func reset() { scanned = 0 }

    public mutating func parse(_ input: UnsafeRawBufferPointer) -> ParseResult {
        let bytes = input.bindMemory(to: UInt8.self)
        let count = bytes.count
        // RFC 9112 section 2.2: ignore empty lines before the request line.
        var start = 0
        while start < count && start < limits.maxHeaderBytes {
            if bytes[start] == LF { start += 1 }
            else if bytes[start] == CR && start + 1 < count && bytes[start + 1] == LF { start += 2 }
            else { break }
        }
        if start >= limits.maxHeaderBytes { return .invalid(.headerFieldsTooLarge) }
        if start >= count { return .incomplete }

        guard let end = findHeadEnd(bytes, from: max(start, scanned)) else {
            scanned = max(start, count - 3)
            // No end yet: fail early only with the error the whole head would get.
            if let error = requestLineError(bytes, start: start, end: count) { return .invalid(error) }
            if count - start > limits.maxHeaderBytes { return .invalid(.headerFieldsTooLarge) }
            return .incomplete
        }
        scanned = 0
        if end - start > limits.maxHeaderBytes {
            return .invalid(requestLineError(bytes, start: start, end: end) ?? .headerFieldsTooLarge)
        }
        switch parseHead(bytes, start: start, end: end) {
        case .success(let head): return .complete(head, consumed: end)
        case .failure(let error): return .invalid(error)
        }
    }

    /// Returns the index just past the blank line ending the head.
    private func findHeadEnd(_ b: UnsafeBufferPointer<UInt8>, from: Int) -> Int? {
        var i = from
        while i < b.count {
            if b[i] == LF {
                // LF LF or LF CR LF ends the head.
                if i + 1 < b.count && b[i + 1] == LF { return i + 2 }
                if i + 2 < b.count && b[i + 1] == CR && b[i + 2] == LF { return i + 3 }
            }
            i += 1
        }
        return nil
    }

    /// Errors in the request line that no later byte can cure: an over-long
    /// method or target. Checked before the head is complete, so a client
    /// cannot hold a connection with an endless target, and kept identical
    /// to what `parseHead` decides, so the answer does not depend on how the
    /// bytes were split.
    private func requestLineError(_ b: UnsafeBufferPointer<UInt8>, start: Int, end: Int) -> HTTPError? {
        var i = start
        while i < end && isTokenChar(b[i]) { i += 1 }
        if i - start > Self.maxMethodBytes { return .badRequest("method too long") }
        guard i < end else { return nil }
        // A byte that cannot be in a method (a TLS client hello's 0x16 on
        // the plain port, binary noise) is refused now, not after
        // header_timeout. (A CR that ends the bytes so far may still start
        // an empty line before the request line.)
        if b[i] != SP {
            if i == start && b[i] == CR && i + 1 == end { return nil }
            return .badRequest("malformed request line")
        }
        i += 1
        let targetStart = i
        while i < end && b[i] > SP && b[i] < DEL { i += 1 }
        if i - targetStart > limits.maxTargetBytes { return .uriTooLong }
        return nil
    }

    /// No registered method is longer than this.
    static let maxMethodBytes = 32

    private func parseHead(_ b: UnsafeBufferPointer<UInt8>, start: Int, end: Int) -> Result<RequestHead, HTTPError> {
        var i = start
        // ---- request line: method SP target SP HTTP/1.x
        let methodStart = i
        while i < end && isTokenChar(b[i]) { i += 1 }
        if i - methodStart > Self.maxMethodBytes { return .failure(.badRequest("method too long")) }
        if i == methodStart || i >= end || b[i] != SP { return .failure(.badRequest("malformed request line")) }
        let method = i - methodStart == 3 && b[methodStart] == 0x47 && b[methodStart + 1] == 0x45 && b[methodStart + 2] == 0x54
            ? "GET" : string(b, methodStart, i)  // the usual one without building (and checking) a string
        i += 1
        let targetStart = i
        // Dot segments can only start after a "/" with "." or "%": note it
        // in this scan, so most targets need no second look.
        var mayHaveDotSegment = false, mayHaveOtherSeparator = false
        while i < end && b[i] > SP && b[i] < DEL {
            if b[i] == 0x2F && i + 1 < end && (b[i + 1] == 0x2E || b[i + 1] == 0x25) { mayHaveDotSegment = true }
            if b[i] == 0x5C || b[i] == 0x25 { mayHaveOtherSeparator = true }
            i += 1
        }
        if i == targetStart { return .failure(.badRequest("missing request target")) }
        if i - targetStart > limits.maxTargetBytes { return .failure(.uriTooLong) }
        if i >= end || b[i] != SP { return .failure(.badRequest("malformed request target")) }
        let target = string(b, targetStart, i)
        i += 1
        // "HTTP/" DIGIT "." DIGIT
        guard i + 8 <= end, b[i] == 0x48, b[i + 1] == 0x54, b[i + 2] == 0x54, b[i + 3] == 0x50, b[i + 4] == 0x2F,
              isDigit(b[i + 5]), b[i + 6] == 0x2E, isDigit(b[i + 7])
        else { return .failure(.badRequest("malformed HTTP version")) }
        let major = Int(b[i + 5] - 0x30), minor = Int(b[i + 7] - 0x30)
        i += 8
        guard let afterLine = lineEnd(b, i, end) else { return .failure(.badRequest("malformed request line")) }
        i = afterLine
        if major != 1 || minor > 1 { return .failure(.versionNotSupported) }
        let normalized: String
        switch RequestRules.checkedTarget(target, method: method, mayHaveDotSegment: mayHaveDotSegment,
                                          mayHaveOtherSeparator: mayHaveOtherSeparator) {
        case .success(let checked): normalized = checked
        case .failure(let error): return .failure(error)
        }

        // ---- header fields
        var headers = HeaderFields()
        headers.reserveCapacity(16)
        while true {
            if b[i] == LF { i += 1; break }
            if b[i] == CR && i + 1 < end && b[i + 1] == LF { i += 2; break }
            if b[i] == SP || b[i] == HTAB { return .failure(.badRequest("obsolete line folding")) }
            let nameStart = i
            while i < end && isTokenChar(b[i]) { i += 1 }
            if i == nameStart || i >= end || b[i] != COLON {
                return .failure(.badRequest("malformed header field"))
            }
            let name = CommonFieldNames.match(b, nameStart, i) ?? lowercasedString(b, nameStart, i)
            i += 1
            while i < end && (b[i] == SP || b[i] == HTAB) { i += 1 }
            let valueStart = i
            var valueEnd = i
            var high: UInt8 = 0
            while i < end && b[i] != CR && b[i] != LF {
                let c = b[i]
                if c < SP && c != HTAB || c == DEL { return .failure(.badRequest("invalid character in header value")) }
                high |= c
                i += 1
                if c != SP && c != HTAB { valueEnd = i }
            }
            guard let next = lineEnd(b, i, end) else { return .failure(.badRequest("bare CR in header section")) }
            i = next
            // obs-text (0x80-0xFF) is kept byte for byte (FieldBytes), not read as UTF-8.
            let value = high < 0x80 ? string(b, valueStart, valueEnd)
                : FieldBytes.string(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: b[valueStart..<valueEnd])))
            headers.append(HeaderField(lowercasedName: name, value: value))
            if headers.count > limits.maxHeaderCount { return .failure(.headerFieldsTooLarge) }
            if i >= end { return .failure(.badRequest("unterminated header section")) }
        }

        var head = RequestHead(method: method, target: normalized, minorVersion: minor, headers: headers,
                               framing: .none, expectsContinue: false, keepAlive: minor == 1)
        if let error = RequestRules.applySemantics(&head, limits: limits) { return .failure(error) }
        return .success(head)
    }

    private func lineEnd(_ b: UnsafeBufferPointer<UInt8>, _ i: Int, _ end: Int) -> Int? {
        if i < end && b[i] == LF { return i + 1 }
        if i + 1 < end && b[i] == CR && b[i + 1] == LF { return i + 2 }
        return nil
    }
}

/// Splits a comma-separated list, trimming optional whitespace; empty
/// elements are kept so that "chunked," is noticed.
func splitList(_ value: String) -> [String] {
    value.split(separator: ",", omittingEmptySubsequences: false).map {
        $0.trimmingCharacters(in: " \t")
    }
}

extension Substring {
    func trimmingCharacters(in set: String) -> String {
        var s = self[...]
        while let f = s.first, set.contains(f) { s = s.dropFirst() }
        while let l = s.last, set.contains(l) { s = s.dropLast() }
        return String(s)
    }
}

let CR: UInt8 = 0x0D
let LF: UInt8 = 0x0A
let SP: UInt8 = 0x20
let HTAB: UInt8 = 0x09
let COLON: UInt8 = 0x3A
let DEL: UInt8 = 0x7F

@inline(__always) func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

/// tchar from RFC 9110 section 5.6.2.
private let tokenTable: [Bool] = {
    var t = [Bool](repeating: false, count: 256)
    for c in UInt8(ascii: "a")...UInt8(ascii: "z") { t[Int(c)] = true }
    for c in UInt8(ascii: "A")...UInt8(ascii: "Z") { t[Int(c)] = true }
    for c in UInt8(ascii: "0")...UInt8(ascii: "9") { t[Int(c)] = true }
    for c in "!#$%&'*+-.^_`|~".utf8 { t[Int(c)] = true }
    return t
}()

@inline(__always) func isTokenChar(_ c: UInt8) -> Bool { tokenTable[Int(c)] }

@inline(__always) func string(_ b: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> String {
    String(decoding: UnsafeBufferPointer(rebasing: b[from..<to]), as: UTF8.self)
}

@inline(__always) func lowercasedString(_ b: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> String {
    String(unsafeUninitializedCapacity: to - from) { out in
        for k in 0..<(to - from) {
            let c = b[from + k]
            out[k] = (c >= 0x41 && c <= 0x5A) ? c | 0x20 : c
        }
        return to - from
    }
}
