import HTTPHeaders

/// Builds response heads as bytes. Used when a response is stored (once) and
/// for error answers; a cache hit only appends its per-request fields.
public enum ResponseSerializer {
    /// "HTTP/1.1 200 OK\r\n" followed by each field; no terminating blank line,
    /// so the caller can append more fields.
    /// `reason`: the upstream's reason phrase, kept when it is safe to repeat.
    public static func headPrefix(status: Int, reason: String? = nil, headers: HeaderFields) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        appendStatusLine(status, reason: reason, to: &out)
        for field in headers {
            appendField(field.name, field.value, to: &out)
        }
        return out
    }

    /// "HTTP/1.1 <status> <reason>\r\n"; a reason with control characters
    /// (or none) is replaced by the standard phrase.
    public static func appendStatusLine(_ status: Int, reason: String?, to out: inout [UInt8]) {
        out.append(contentsOf: "HTTP/1.1 ".utf8)
        appendDecimal(status, to: &out)
        out.append(SP)
        if let reason, !reason.isEmpty, reason.utf8.allSatisfy({ $0 == HTAB || ($0 >= SP && $0 != DEL) }) {
            FieldBytes.append(reason, to: &out)
        } else {
            out.append(contentsOf: reasonPhrase(status).utf8)
        }
        out.append(contentsOf: [CR, LF])
    }

    /// "Name: value\r\n" with the name in its usual case, assembled in a
    /// stack buffer and appended at once (this runs for every field of every
    /// forwarded and stored response).
    public static func appendField(_ name: String, _ value: String, to out: inout [UInt8]) {
        // The value's own bytes (see FieldBytes), not its UTF-8: the same
        // when it is ASCII, as nearly every value is.
        var value = value
        let ascii = value.withUTF8 { v -> Bool in
            guard FieldBytes.isASCII(UnsafeRawBufferPointer(v)) else { return false }
            appendField(name, bytes: v, to: &out)
            return true
        }
        if ascii { return }
        var bytes: [UInt8] = []
        FieldBytes.append(value, to: &bytes)
        bytes.withUnsafeBufferPointer { appendField(name, bytes: $0, to: &out) }
    }

    /// "Content-Length: N\r\n" without making a String of N.
    public static func appendContentLength(_ length: Int, to out: inout [UInt8]) {
        out.append(contentsOf: "Content-Length: ".utf8)
        appendDecimal(length, to: &out)
        out.append(contentsOf: [CR, LF])
    }

    private static func appendField(_ name: String, bytes v: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        let special = specialSpelling(name)
        var name = special ?? name
        name.withUTF8 { n in
            let total = n.count + v.count + 4
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: total) { buffer in
                // Raw pointers: this loop runs for every byte of every field name.
                let to = buffer.baseAddress!
                if let from = n.baseAddress {
                    if special != nil {
                        to.update(from: from, count: n.count)
                    } else {
                        var upper = true
                        for i in 0..<n.count {
                            let b = from[i]
                            to[i] = upper && b &- 0x61 < 26 ? b &- 32 : b
                            upper = b == 0x2D
                        }
                    }
                }
                to[n.count] = UInt8(ascii: ":")
                to[n.count + 1] = SP
                if let value = v.baseAddress { (to + n.count + 2).update(from: value, count: v.count) }
                to[total - 2] = CR
                to[total - 1] = LF
                out.append(contentsOf: UnsafeBufferPointer(buffer))
            }
        }
    }

    /// A complete small response with a text body (errors, 100 Continue not included).
    public static func simple(status: Int, body: String, close: Bool, extra: HeaderFields = []) -> [UInt8] {
        var out = headPrefix(status: status, headers: extra)
        appendField("content-type", "text/plain; charset=utf-8", to: &out)
        appendField("content-length", String(body.utf8.count + 1), to: &out)
        if close { appendField("connection", "close", to: &out) }
        out.append(contentsOf: [CR, LF])
        out.append(contentsOf: body.utf8)
        out.append(LF)
        return out
    }

    /// Writes a non-negative integer in decimal without allocating a String.
    @inline(__always)
    public static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        if value < 0 {
            out.append(UInt8(ascii: "-"))
            appendDecimal(-value, to: &out)
            return
        }
        if value < 10 { out.append(UInt8(0x30 + value)); return }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var n = value, count = 0
        withUnsafeMutableBytes(of: &digits) { d in
            while n > 0 { d[count] = UInt8(0x30 + n % 10); n /= 10; count += 1 }
            for k in stride(from: count - 1, through: 0, by: -1) { out.append(d[k]) }
        }
    }

    /// The usual spelling of names that are not plain title case (matched
    /// by length first: no hashing on the per-field path).
    static func specialSpelling(_ name: String) -> String? {
        switch name.utf8.count {
        case 2: return name == "te" ? "TE" : nil
        case 3: return name == "dnt" ? "DNT" : nil
        case 4: return name == "etag" ? "ETag" : nil
        case 11: return name == "content-md5" ? "Content-MD5" : nil
        case 16: return name == "www-authenticate" ? "WWW-Authenticate" : name == "x-xss-protection" ? "X-XSS-Protection" : nil
        default: return nil
        }
    }

    /// "content-type" -> "Content-Type": clients and tools expect the usual case.
    public static func canonicalName(_ name: String) -> String {
        var out: [UInt8] = []
        appendCanonicalName(name, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the canonical spelling byte by byte.
    static func appendCanonicalName(_ name: String, to out: inout [UInt8]) {
        if let special = specialSpelling(name) {
            out.append(contentsOf: special.utf8)
            return
        }
        var upper = true
        for b in name.utf8 {
            out.append(upper && b >= 0x61 && b <= 0x7A ? b &- 32 : b)
            upper = b == 0x2D
        }
    }

    /// The chunk-size line for a chunk of `count` bytes.
    public static func chunkHeader(_ count: Int) -> [UInt8] {
        var out: [UInt8] = []
        var started = false
        for shift in stride(from: 60, through: 0, by: -4) {
            let nibble = (count >> shift) & 0xF
            if nibble != 0 || started || shift == 0 {
                started = true
                out.append(nibble < 10 ? UInt8(0x30 + nibble) : UInt8(0x61 + nibble - 10))
            }
        }
        out.append(contentsOf: [CR, LF])
        return out
    }

    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 203: return "Non-Authoritative Information"
        case 204: return "No Content"
        case 206: return "Partial Content"
        case 300: return "Multiple Choices"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        case 304: return "Not Modified"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 410: return "Gone"
        case 411: return "Length Required"
        case 412: return "Precondition Failed"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 417: return "Expectation Failed"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        default: return "Status \(status)"
        }
    }
}

/// Parsing of the response lines libcurl hands back, one per call.
public enum ResponseLine {
    /// The status code of "HTTP/1.1 200 OK" or "HTTP/2 200"; nil if not a status line.
    public static func status(_ line: String) -> Int? {
        guard line.hasPrefix("HTTP/") else { return nil }
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        guard parts.count >= 2, parts[1].utf8.count == 3, let code = Int(parts[1]), code >= 100, code <= 999 else { return nil }
        return code
    }

    /// The reason phrase of a status line ("OK" of "HTTP/1.1 200 OK"); nil for none.
    public static func reason(_ line: String) -> String? {
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let reason = parts[2].trimmingCharacters(in: " \t\r\n")
        return reason.isEmpty ? nil : reason
    }

    /// Status and reason of a status line, read from its bytes when it has
    /// the usual shape ("HTTP/1.1 200 OK", "HTTP/2 200"); other lines go
    /// through `status(_:)` and `reason(_:)`, with the same results.
    public static func statusAndReason(bytes: UnsafeRawBufferPointer) -> (status: Int, reason: String?)? {
        if bytes.starts(with: "HTTP/".utf8), let space = bytes.firstIndex(of: SP), space + 4 <= bytes.count,
           bytes[space + 1] != SP, (space + 4 == bytes.count || bytes[space + 4] == SP) {
            var code = 0
            for b in bytes[(space + 1)..<(space + 4)] {
                guard b >= 0x30 && b <= 0x39 else { return general(bytes) }
                code = code * 10 + Int(b - 0x30)
            }
            guard code >= 100 else { return nil }
            var start = min(space + 5, bytes.count), end = bytes.count
            func isSpace(_ b: UInt8) -> Bool { b == SP || b == HTAB || b == CR || b == LF }
            while start < end && isSpace(bytes[start]) { start += 1 }
            while end > start && isSpace(bytes[end - 1]) { end -= 1 }
            let reason = start < end ? FieldBytes.string(UnsafeRawBufferPointer(rebasing: bytes[start..<end])) : nil
            return (code, reason)
        }
        return general(bytes)
    }

    private static func general(_ bytes: UnsafeRawBufferPointer) -> (status: Int, reason: String?)? {
        let text = FieldBytes.string(bytes)
        return status(text).map { ($0, reason(text)) }
    }

    /// A "Name: value" line, name lowercased and value trimmed.
    public static func field(_ line: String) -> HeaderField? {
        var line = line
        return line.withUTF8 { field(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// The same from the line's bytes: it runs for every field of every
    /// upstream response, so it builds the two strings and nothing else.
    public static func field(bytes: UnsafeRawBufferPointer) -> HeaderField? {
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return nil }
        for b in bytes[..<colon] where !isTokenChar(b) { return nil }
        let name = String(unsafeUninitializedCapacity: colon) { out in
            for i in 0..<colon {
                let b = bytes[i]
                out[i] = b >= 0x41 && b <= 0x5A ? b | 0x20 : b
            }
            return colon
        }
        var start = colon + 1, end = bytes.count
        func isSpace(_ b: UInt8) -> Bool { b == SP || b == HTAB || b == CR || b == LF }
        while start < end && isSpace(bytes[start]) { start += 1 }
        while end > start && isSpace(bytes[end - 1]) { end -= 1 }
        let value = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
        var high: UInt8 = 0, control = false
        for b in value {
            high |= b
            if b < SP && b != HTAB || b == DEL { control = true }
        }
        if !control {
            return HeaderField(lowercasedName: name, value: high < 0x80 ? String(decoding: value, as: UTF8.self) : FieldBytes.string(value))
        }
        // RFC 9110 section 5.5: CR, LF and NUL in a value are dangerous (a
        // bare CR ends a line for some clients: response splitting); each
        // control byte is replaced by SP before the field goes anywhere.
        let cleaned = value.map { $0 < SP && $0 != HTAB || $0 == DEL ? SP : $0 }
        return HeaderField(lowercasedName: name, value: cleaned.withUnsafeBytes { FieldBytes.string($0) })
    }
}
