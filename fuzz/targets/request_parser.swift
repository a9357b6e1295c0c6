// libFuzzer target: the HTTP/1.1 request parser (Sources/HTTP1). Built by
// fuzz/run.sh together with that module's sources.
//
// Beyond "no crash": a complete head consumes no more than the input, and
// feeding the same bytes in two pieces (as a socket would) gives the same
// answer as feeding them at once.
@_cdecl("LLVMFuzzerTestOneInput")
public func requestParserFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    var whole = RequestParser()
    let once = whole.parse(input)
    if case .complete(_, let consumed) = once { precondition(consumed <= size) }
    guard size > 1 else { return 0 }
    var pieces = RequestParser()
    let cut = Int(data[0]) % size
    if case .incomplete = pieces.parse(UnsafeRawBufferPointer(rebasing: input[0..<cut])) {
        precondition(pieces.parse(input) == once, "split-dependent parse")
    }
    return 0
}
