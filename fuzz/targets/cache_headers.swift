// libFuzzer target: the response-field parsers of Sources/CacheSemantics
// (Cache-Control, targeted fields as RFC 8941 dictionaries, HTTP dates,
// Vary, Range). The first byte picks the parser; the rest is the value.
@_cdecl("LLVMFuzzerTestOneInput")
public func cacheHeadersFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let value = String(decoding: UnsafeBufferPointer(start: data + 1, count: size - 1), as: UTF8.self)
    switch data[0] % 5 {
    case 0:
        let cc = CacheControl(value)
        if let maxAge = cc.maxAge { precondition(maxAge >= 0) }
    case 1:
        _ = CacheControl(targeted: value)
    case 2:
        if let seconds = HTTPDate.parse(value) {
            // What we format, we parse back.
            precondition(HTTPDate.parse(HTTPDate.formatString(seconds)) == seconds)
        }
    case 3:
        if let names = Vary.fieldNames(value) { precondition(names == names.sorted()) }
        _ = Vary.normalize(value, field: "accept-language")
    default:
        switch ByteRange.evaluate(range: value, ifRange: nil, length: 1000, etag: "\"e\"", lastModified: nil) {
        case .partial(let first, let last): precondition(first <= last && last < 1000)
        default: break
        }
    }
    return 0
}
