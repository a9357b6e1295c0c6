// libFuzzer target: the chunked request-body decoder (Sources/HTTP1).
//
// Beyond "no crash": the decoded body is never longer than the input, the
// limit holds, and decoding in two pieces yields the same bytes and outcome.
@_cdecl("LLVMFuzzerTestOneInput")
public func chunkedDecoderFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    let limit = 4096
    var once = ChunkedDecoder(maxBodyBytes: limit)
    var bodyOnce: [UInt8] = []
    let outcome = once.decode(input) { bodyOnce.append(contentsOf: $0) }
    precondition(bodyOnce.count <= size && bodyOnce.count <= limit)
    if case .done(let consumed) = outcome { precondition(consumed <= size) }
    guard size > 1, case .done = outcome else { return 0 }
    var split = ChunkedDecoder(maxBodyBytes: limit)
    var bodySplit: [UInt8] = []
    let cut = Int(data[0]) % size
    let first = split.decode(UnsafeRawBufferPointer(rebasing: input[0..<cut])) { bodySplit.append(contentsOf: $0) }
    guard case .needMore = first else { return 0 }
    let second = split.decode(UnsafeRawBufferPointer(rebasing: input[cut...])) { bodySplit.append(contentsOf: $0) }
    if case .done = second { precondition(bodySplit == bodyOnce, "split-dependent body") }
    return 0
}
