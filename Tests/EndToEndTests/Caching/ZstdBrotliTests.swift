import Foundation
import XCTest

/// zstd (RFC 8878) and brotli (RFC 7932) end to end: a stored body in
/// either is served as stored to clients that take it and decoded for the
/// others (as if the decoded body were stored: its own length, weak ETag,
/// ranges, HEAD), a corrupt one is never sent as whole; `compress_codec`
/// stores `compress` types in either.
final class ZstdBrotliEndToEndTests: ConfiguredTestCase {
    private func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }

    /// Debian's python3-zstandard and python3-brotli (not Larder's code): what a client would do.
    private func decode(_ coding: String, _ bytes: [UInt8]) throws -> [UInt8] {
        let path = temporaryPath("larder-coded")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let program = coding == "br" ? "import brotli,sys; sys.stdout.buffer.write(brotli.decompress(open(sys.argv[1],'rb').read()))"
            : "import zstandard,sys; sys.stdout.buffer.write(zstandard.ZstdDecompressor().stream_reader(open(sys.argv[1],'rb')).read())"
        let r = try runProgram(["/usr/bin/python3", "-c", program, path])
        XCTAssertEqual(r.status, 0, r.stderr)
        return Array(r.stdout.utf8)
    }

    func testAStoredZstdOrBrotliBodyIsDecodedForClientsThatDoNotTakeIt() throws {
        let (origin, larder) = try start(config: "")
        let c = try larder.client()
        for (coding, extra) in [("zstd", ""), ("zstd", "&coding_stream=1"), ("br", "")] {
            let path = "/coded/\(coding)\(extra.isEmpty ? "" : "-stream")"
            let plain = try HTTPClient(port: origin.port).get(path + "?size=20000").body
            XCTAssertEqual(plain.count, 20000)
            let target = path + "?size=20000&etag=c1&coding=\(coding)\(extra)"
            let coded = try c.get(target, headers: ["Accept-Encoding: gzip, \(coding)"])
            XCTAssertEqual(coded.header("content-encoding"), coding)
            XCTAssertLessThan(coded.body.count, plain.count / 2)
            XCTAssertTrue(try decode(coding, coded.body) == plain, "\(target): as the origin sent it")
            let again = try c.get(target, headers: ["Accept-Encoding: \(coding)"])
            XCTAssertTrue(isHit(again))
            XCTAssertTrue(again.body == coded.body, "the stored bytes to a client that takes \(coding)")

            for accept in [nil, "gzip", "identity"] {
                let why = "\(target), Accept-Encoding \(accept ?? "none")"
                let decoded = try c.get(target, headers: accept.map { ["Accept-Encoding: \($0)"] } ?? [])
                XCTAssertEqual(decoded.status, 200, why)
                XCTAssertTrue(isHit(decoded), why)
                XCTAssertNil(decoded.header("content-encoding"), why)
                XCTAssertEqual(decoded.header("content-length"), "20000", why)
                XCTAssertTrue(decoded.body == plain, why)
                XCTAssertEqual(decoded.header("etag"), "W/\"c1\"", why)
            }
            let head = try c.request("HEAD", target)
            XCTAssertEqual(head.header("content-length"), "20000")
            XCTAssertNil(head.header("content-encoding"))
            let part = try c.get(target, headers: ["Range: bytes=100-109"])
            XCTAssertEqual(part.status, 206)
            XCTAssertEqual(part.header("content-range"), "bytes 100-109/20000")
            XCTAssertEqual(part.body, Array(plain[100..<110]))
            XCTAssertEqual(try c.get(target, headers: ["If-None-Match: W/\"c1\""]).status, 304)
            XCTAssertEqual(try origin.count(target), 1, "\(target): one stored copy for every client")
        }
    }

    /// A corrupt stored body: a client that needs it decoded is never sent
    /// garbage as if whole; the upstream's identity copy takes its place.
    func testACorruptStoredBodyIsNotSentDecodedAsWhole() throws {
        let (origin, larder) = try start(config: "")
        for coding in ["zstd", "br"] {
            let path = "/corrupt/\(coding)"
            let plain = try HTTPClient(port: origin.port).get(path + "?size=200000").body
            let target = path + "?size=200000&coding=\(coding)&coding_if_asked=1&coding_corrupt=1"
            _ = try larder.client().get(target, headers: ["Accept-Encoding: \(coding)"])
            // zstd declares its size: its head goes, then the checksum fails and the
            // client is cut; brotli is measured first: it never starts.
            if let first = try? larder.client().get(target) {
                XCTAssertTrue(first.body == plain, "\(coding): if answered, then whole and right")
            }
            let next = try larder.client().get(target)
            XCTAssertEqual(next.status, 200)
            XCTAssertTrue(next.body == plain, "\(coding): the identity copy")
            XCTAssertNil(next.header("content-encoding"))
            XCTAssertLessThanOrEqual(try origin.count(target), 3, coding)
        }
        XCTAssertNotNil(larder.child.waitFor("stored br body of /corrupt/br.* cannot be decoded"), larder.child.stderr)
    }

    func testCompressCodecStoresListedTypesInZstdOrBrotli() throws {
        for codec in ["zstd", "br"] {
            let (origin, larder) = try start(config: "compress = [\"application/json\"]\ncompress_codec = \"\(codec)\"\n")
            let c = try larder.client()
            let json = "/api/\(codec)?size=30000&etag=j1&extra=Content-Type:application/json"
            let plain = try c.get(json).body
            XCTAssertEqual(plain.count, 30000)
            // The encoded copy is made on an I/O thread a moment after the store.
            var coded = try c.get(json, headers: ["Accept-Encoding: \(codec)"])
            let deadline = Date().addingTimeInterval(20)
            while coded.header("content-encoding") == nil && Date() < deadline {
                usleep(10_000)
                coded = try c.get(json, headers: ["Accept-Encoding: \(codec)"])
            }
            XCTAssertEqual(coded.header("content-encoding"), codec)
            XCTAssertEqual(coded.header("etag"), "W/\"j1\"")
            XCTAssertEqual(coded.header("vary"), "Accept-Encoding")
            XCTAssertLessThan(coded.body.count, plain.count / 3)
            XCTAssertTrue(try decode(codec, coded.body) == plain, "\(codec): a client's own decoder gives the upstream's body")
            let decoded = try c.get(json, headers: ["Accept-Encoding: gzip"])
            XCTAssertTrue(isHit(decoded))
            XCTAssertNil(decoded.header("content-encoding"))
            XCTAssertEqual(decoded.header("content-length"), "30000")
            XCTAssertTrue(decoded.body == plain, "\(codec): decoded for a client without it")
            XCTAssertEqual(try origin.count(json), 1)
            let printed = try runProgram([Paths.larder, "check-config", "--print", "--config",
                                          try writeConfig("compress_codec = \"\(codec)\"\n")])
            XCTAssertTrue(printed.stdout.contains("compress_codec = \"\(codec)\""), printed.stdout)
        }
        let bad = try startChild(Paths.larder, ["check-config", "--config", try writeConfig("compress_codec = \"lzma\"\n")])
        XCTAssertEqual(bad.waitForExit(timeout: 20), 78)
        bad.drainOutput()
        XCTAssertTrue(bad.stderr.contains("compress_codec: expected \"gzip\", \"zstd\" or \"br\""), bad.stderr)
    }
}
