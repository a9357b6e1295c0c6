// libFuzzer target: the HTTP/1.1 request parser (Sources/HTTP1). Built by
// fuzz/run.sh together with that module's sources.
//
// Beyond "no crash": a complete head consumes no more than the input and
// its target has no dot segment left, and
// feeding the same bytes in two pieces (as a socket would) gives the same
// answer as feeding them at once.
import HTTPHeaders
@_cdecl("LLVMFuzzerTestOneInput")
public func requestParserFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    var whole = RequestParser()
    let once = whole.parse(input)
    if case .complete(let head, let consumed) = once {
        precondition(consumed <= size)
        // The target routing and keying see has no dot segment left.
        precondition(DotSegments.normalize(head.target) == head.target, "dot segment survived")
    }
    // The same bytes as an upstream field line: no control byte reaches a
    // value (response splitting), and any Content-Length is judged, not trapped on.
    if let field = ResponseLine.field(bytes: input) {
        var bytes: [UInt8] = []
        FieldBytes.append(field.value, to: &bytes)
        precondition(!bytes.contains { $0 < 0x20 && $0 != 0x09 || $0 == 0x7F }, "control byte in a value")
        _ = ResponseFraming.of(["content-length": field.value])
    }
    guard size > 1 else { return 0 }
    var pieces = RequestParser()
    let cut = Int(data[0]) % size
    if case .incomplete = pieces.parse(UnsafeRawBufferPointer(rebasing: input[0..<cut])) {
        precondition(pieces.parse(input) == once, "split-dependent parse")
    }
    return 0
}
