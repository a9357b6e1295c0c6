import HTTPHeaders

/// The rules a request head is held to whatever carried it, HTTP/1.1 text
/// (`RequestParser`) or HTTP/2 fields (`head(method:target:headers:limits:)`):
/// the target's form and path, Host, framing, Connection and Expect (RFC
/// 9112; RFC 9113 section 8.3 maps HTTP/2's pseudo-fields onto them). One
/// set of checks and limits for every protocol.
public enum RequestRules {
    /// A request head from fields already split (HTTP/2: the stream's
    /// fields, names in lower case, `:authority` as Host), checked as a
    /// parsed HTTP/1.1 head is: a bad field value, target or framing is
    /// the same error.
    public static func head(method: String, target: String, headers: HeaderFields, limits: ParseLimits) -> Result<RequestHead, HTTPError> {
        guard !method.isEmpty, method.utf8.count <= RequestParser.maxMethodBytes, method.utf8.allSatisfy(isTokenChar) else {
            return .failure(.badRequest("malformed method"))
        }
        if headers.count > limits.maxHeaderCount { return .failure(.headerFieldsTooLarge) }
        for field in headers {
            guard !field.name.isEmpty, field.name.utf8.allSatisfy(isTokenChar) else { return .failure(.badRequest("malformed header field")) }
            // (obs-text, carried one scalar per byte by `FieldBytes`, is all bytes over 0x7F.)
            guard field.value.utf8.allSatisfy({ $0 >= SP && $0 != DEL || $0 == HTAB }) else {
                return .failure(.badRequest("invalid character in header value"))
            }
        }
        if target.isEmpty { return .failure(.badRequest("missing request target")) }
        if target.utf8.count > limits.maxTargetBytes { return .failure(.uriTooLong) }
        var mayHaveDotSegment = false, mayHaveOtherSeparator = false, previous: UInt8 = 0
        for c in target.utf8 {
            guard c > SP && c < DEL else { return .failure(.badRequest("malformed request target")) }
            if previous == 0x2F && (c == 0x2E || c == 0x25) { mayHaveDotSegment = true }
            if c == 0x5C || c == 0x25 { mayHaveOtherSeparator = true }
            previous = c
        }
        var head = RequestHead(method: method, target: target, minorVersion: 1, headers: headers, framing: .none,
                               expectsContinue: false, keepAlive: true)
        switch checkedTarget(target, method: method, mayHaveDotSegment: mayHaveDotSegment, mayHaveOtherSeparator: mayHaveOtherSeparator) {
        case .success(let normalized): head.target = normalized
        case .failure(let error): return .failure(error)
        }
        if let error = applySemantics(&head, limits: limits) { return .failure(error) }
        return .success(head)
    }

    /// The target's form (origin, absolute, or "*" for OPTIONS), and its
    /// path with dot segments removed: routing, the cache key and the
    /// upstream all see this one path. The flags say where a scan of its
    /// bytes saw "/." or "/%", and "\\" or "%".
    static func checkedTarget(_ target: String, method: String, mayHaveDotSegment: Bool,
                              mayHaveOtherSeparator: Bool) -> Result<String, HTTPError> {
        if !(target.utf8.first == UInt8(ascii: "/") || target == "*" || target.hasPrefix("http://") || target.hasPrefix("https://")) {
            return .failure(.badRequest("unsupported request target form"))
        }
        if target == "*" && method != "OPTIONS" { return .failure(.badRequest("'*' target is only for OPTIONS")) }
        let normalized = mayHaveDotSegment ? DotSegments.normalize(target) : target
        if mayHaveOtherSeparator && DotSegments.isAmbiguous(normalized) {
            return .failure(.badRequest("dot segment next to an encoded slash or a backslash in the path"))
        }
        return .success(normalized)
    }

    /// Host, framing, Connection and Expect rules of RFC 9112.
    static func applySemantics(_ head: inout RequestHead, limits: ParseLimits) -> HTTPError? {
        var hostCount = 0
        var host: String?
        var contentLengths: [String] = []
        var transferCodings: [String] = []
        var connectionTokens: [String] = []
        for field in head.headers {
            switch field.name {
            case "host": hostCount += 1; host = field.value
            case "content-length": contentLengths.append(contentsOf: splitList(field.value))
            case "transfer-encoding": transferCodings.append(contentsOf: splitList(field.value).map { $0.lowercased() })
            case "connection": connectionTokens.append(contentsOf: splitList(field.value).map { $0.lowercased() })
            case "expect":
                if field.value.lowercased() == "100-continue" { head.expectsContinue = true }
            default: break
            }
        }
        if head.minorVersion == 1 && hostCount == 0 { return .badRequest("missing Host header") }
        if hostCount > 1 { return .badRequest("more than one Host header") }
        // The absolute-form's authority is the host (RFC 9112 section 3.2.2),
        // so routing, the key and the upstream read the one the target names.
        if head.target.utf8.first != UInt8(ascii: "/") {
            switch HostField.authority(ofTarget: head.target) {
            case .none: break
            case .invalid: return .badRequest("invalid authority in the request target")
            case .host(let authority):
                let field = HeaderField(lowercasedName: "host", value: authority)
                if let index = head.headers.firstIndex(where: { $0.name == "host" }) {
                    head.headers.replaceSubrange(index..<index + 1, with: CollectionOfOne(field))
                } else {
                    head.headers.append(field)
                }
                host = authority
            }
        }
        if let host, !HostField.isValid(host) { return .badRequest("invalid Host header") }

        if !transferCodings.isEmpty || head.headers.contains(where: { $0.name == "transfer-encoding" }) {
            if !contentLengths.isEmpty { return .badRequest("both Content-Length and Transfer-Encoding") }
            if head.minorVersion == 0 { return .badRequest("Transfer-Encoding in an HTTP/1.0 request") }
            guard let last = transferCodings.last, !last.isEmpty else { return .badRequest("empty Transfer-Encoding") }
            if last != "chunked" {
                return transferCodings.contains("chunked")
                    ? .badRequest("chunked is not the final transfer coding")
                    : .unsupportedTransferCoding("transfer coding \(last)")
            }
            if transferCodings.count > 1 {
                return transferCodings.dropLast().contains("chunked")
                    ? .badRequest("chunked applied twice")
                    : .unsupportedTransferCoding("transfer coding \(transferCodings[0])")
            }
            head.framing = .chunked
        } else if !contentLengths.isEmpty {
            // Identical repeated values are tolerated (RFC 9112 section 6.3).
            let first = contentLengths[0]
            guard contentLengths.allSatisfy({ $0 == first }) else { return .badRequest("conflicting Content-Length values") }
            guard !first.isEmpty, first.utf8.count <= 18, first.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let length = Int(first)
            else { return .badRequest("invalid Content-Length") }
            if length > limits.maxBodyBytes { return .contentTooLarge }
            head.framing = length > 0 ? .contentLength(length) : .none
        }

        if connectionTokens.contains("close") { head.keepAlive = false }
        else if head.minorVersion == 0 && connectionTokens.contains("keep-alive") { head.keepAlive = true }
        if head.framing == .none { head.expectsContinue = false }
        return nil
    }
}
