import Foundation
import XCTest
@testable import CacheSemantics

/// Replays fuzz/corpus/cache_headers (see fuzz/run.sh) with the fuzz
/// target's checks: the first byte picks the parser, the rest is the value.
final class FuzzCorpusTests: XCTestCase {
    func testCacheHeaderCorpus() {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let dir = root.appendingPathComponent("fuzz/corpus/cache_headers")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        XCTAssertGreaterThan(names.count, 10, "the corpus is in the repository")
        for name in names {
            guard let data = FileManager.default.contents(atPath: dir.appendingPathComponent(name).path), let first = data.first
            else { continue }
            let value = String(decoding: data.dropFirst(), as: UTF8.self)
            switch first % 5 {
            case 0:
                if let maxAge = CacheControl(value).maxAge { XCTAssertGreaterThanOrEqual(maxAge, 0, name) }
            case 1:
                _ = CacheControl(targeted: value)
            case 2:
                if let seconds = HTTPDate.parse(value) {
                    XCTAssertEqual(HTTPDate.parse(HTTPDate.formatString(seconds)), seconds, name)
                }
            case 3:
                if let names = Vary.fieldNames(value) { XCTAssertEqual(names, names.sorted(), name) }
                _ = Vary.normalize(value, field: "accept-language")
            default:
                if case .partial(let a, let b) = ByteRange.evaluate(range: value, ifRange: nil, length: 1000, etag: "\"e\"",
                                                                   lastModified: nil) {
                    XCTAssertTrue(a <= b && b < 1000, name)
                }
            }
        }
    }

    /// fuzz/corpus/multipart, with the multipart target's checks: the
    /// first byte picks the boundary's length, the rest is the body.
    func testMultipartCorpus() {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let dir = root.appendingPathComponent("fuzz/corpus/multipart")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        XCTAssertGreaterThan(names.count, 5, "the corpus is in the repository")
        var split = 0
        for name in names {
            guard let data = FileManager.default.contents(atPath: dir.appendingPathComponent(name).path), let first = data.first
            else { continue }
            let boundary = String(repeating: "B", count: Int(first % 8) + 1)
            let body = Array(data.dropFirst())
            let parts = body.withUnsafeBytes({ MultipartByteranges.parts(of: $0, boundary: boundary) })
            // Read as it streams, cut in two: the same parts, or the same refusal.
            var stream = MultipartStream(boundary: boundary)
            var streamed: [PartialContent.Piece] = []
            let cut = body.count / 2
            let wellFormed = [body[..<cut], body[cut...]].allSatisfy { half in
                Array(half).withUnsafeBytes { bytes in
                    stream.consume(bytes) { if case .part(let piece, _) = $0 { streamed.append(piece) } }
                }
            }
            XCTAssertEqual(wellFormed && stream.isComplete, parts != nil, name)
            guard let parts else { continue }
            XCTAssertEqual(streamed, parts.map(\.piece), name)
            split += 1
            for part in parts {
                XCTAssertTrue(part.bytes.upperBound <= body.count && part.bytes.count == part.piece.count, name)
                XCTAssertEqual(part.piece.length, parts[0].piece.length, name)
            }
        }
        XCTAssertGreaterThan(split, 2, "well-formed seeds are split")
    }
}
