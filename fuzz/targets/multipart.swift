// libFuzzer target: the multipart/byteranges splitter of a stored 206
// (Sources/CacheSemantics/MultipartByteranges.swift). Any body must give
// parts inside it, of one representation, each as long as its range, or
// a clean refusal; read as it streams, cut in two anywhere, it must give
// the same parts. The first byte picks the boundary's length.
@_cdecl("LLVMFuzzerTestOneInput")
public func multipartFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let body = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    let boundary = String(repeating: "B", count: Int(data[0] % 8) + 1)
    let parts = MultipartByteranges.parts(of: body, boundary: boundary)
    let cut = body.count / 2
    var stream = MultipartStream(boundary: boundary)
    var streamed: [(PartialContent.Piece, [UInt8])] = []
    var wellFormed = true
    for half in [UnsafeRawBufferPointer(rebasing: body[..<cut]), UnsafeRawBufferPointer(rebasing: body[cut...])] where wellFormed {
        wellFormed = stream.consume(half) { event in
            switch event {
            case .part(let piece, _): streamed.append((piece, []))
            case .data(let data): streamed[streamed.count - 1].1 += data
            }
        }
    }
    precondition((wellFormed && stream.isComplete) == (parts != nil))
    guard let parts else { return 0 }
    precondition(streamed.map(\.0) == parts.map(\.piece))
    precondition(zip(streamed, parts).allSatisfy { $0.1 == Array(body[$1.bytes]) })
    precondition(!parts.isEmpty && parts.count <= MultipartByteranges.maxParts)
    for part in parts {
        precondition(part.bytes.lowerBound >= 0 && part.bytes.upperBound <= body.count)
        precondition(part.bytes.count == part.piece.count && part.piece.length == parts[0].piece.length)
    }
    let segments = PartialContent.segments(of: parts.map(\.piece))
    precondition(segments.flatMap(\.parts).sorted() == Array(parts.indices))
    return 0
}
