import Foundation
import HTTPHeaders
import XCTest
@testable import HTTP1

/// Replays the libFuzzer corpus kept in fuzz/corpus (fuzz/run.sh grows it;
/// crashes found there are added to it) with the fuzz targets' checks.
final class FuzzCorpusTests: XCTestCase {
    static func corpus(_ target: String) -> [[UInt8]] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let dir = root.appendingPathComponent("fuzz/corpus/\(target)")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.sorted().compactMap { FileManager.default.contents(atPath: dir.appendingPathComponent($0).path).map(Array.init) }
    }

    func testRequestParserCorpus() {
        let inputs = Self.corpus("request_parser")
        XCTAssertGreaterThan(inputs.count, 10, "the corpus is in the repository")
        for input in inputs {
            input.withUnsafeBytes { raw in
                var whole = RequestParser()
                let once = whole.parse(raw)
                if case .complete(let head, let consumed) = once {
                    XCTAssertLessThanOrEqual(consumed, raw.count)
                    XCTAssertEqual(DotSegments.normalize(head.target), head.target, "dot segment survived")
                }
                if let field = ResponseLine.field(bytes: raw) {
                    var bytes: [UInt8] = []
                    FieldBytes.append(field.value, to: &bytes)
                    XCTAssertFalse(bytes.contains { $0 < 0x20 && $0 != 0x09 || $0 == 0x7F }, "control byte in a value")
                    _ = ResponseFraming.of(["content-length": field.value])
                }
                guard raw.count > 1 else { return }
                var pieces = RequestParser()
                let cut = Int(input[0]) % raw.count
                if case .incomplete = pieces.parse(UnsafeRawBufferPointer(rebasing: raw[0..<cut])) {
                    XCTAssertEqual(pieces.parse(raw), once)
                }
            }
        }
    }

    func testChunkedDecoderCorpus() {
        let inputs = Self.corpus("chunked_decoder")
        XCTAssertGreaterThan(inputs.count, 5, "the corpus is in the repository")
        for input in inputs {
            input.withUnsafeBytes { raw in
                var decoder = ChunkedDecoder(maxBodyBytes: 4096)
                var body: [UInt8] = []
                let outcome = decoder.decode(raw) { body.append(contentsOf: $0) }
                XCTAssertLessThanOrEqual(body.count, min(raw.count, 4096))
                if case .done(let consumed) = outcome { XCTAssertLessThanOrEqual(consumed, raw.count) }
            }
        }
    }
}
