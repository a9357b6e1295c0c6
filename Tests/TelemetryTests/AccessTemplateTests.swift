import Bytes
import XCTest
@testable import Telemetry

/// `access_log_format = "custom"`: a template of named fields, parsed
/// once; an unknown field, an unclosed `${` or no field at all is refused.
final class AccessTemplateTests: XCTestCase {
    private func line(_ template: AccessTemplate, upstream: String = "", sni: String? = nil) -> String {
        let out = ByteBuffer()
        var formatter = AccessLineFormatter()
        let figures = AccessLine.Figures(time: 1_764_000_000_042, worker: 1, status: 503, bodyBytes: 12, firstByteMicroseconds: 2_500,
                                         totalMicroseconds: 3_000, result: .miss, upstreamStatus: upstream.isEmpty ? nil : 503,
                                         upstreamMicroseconds: upstream.isEmpty ? nil : 2_000, httpVersion: 20, tls: sni != nil)
        AccessLine.with(figures, client: "10.0.0.9", method: "GET", target: "/a?b=1", cache: Array("fwd=uri-miss".utf8),
                        at: AccessLine.Where(host: "api.test", upstream: upstream, sni: sni)) { formatter.append($0, template, to: out) }
        return String(decoding: out.bytes, as: UTF8.self)
    }

    func testEveryFieldIsWrittenAndWhatIsMissingIsADash() throws {
        let all = try AccessTemplate(AccessTemplate.Field.allCases.map { "$" + $0.rawValue }.joined(separator: "|"))
        XCTAssertEqual(line(all, upstream: "127.0.0.1:9000", sni: "api.test"),
                       "2025-11-24T16:00:00.042Z|10.0.0.9|api.test|GET|/a?b=1|HTTP/2|503|12|2.500|3.000|miss|fwd=uri-miss|"
                       + "127.0.0.1:9000|503|2.000|api.test|1\n")
        let missing = try AccessTemplate("$upstream_addr $upstream_status $upstream_ms $tls_sni")
        XCTAssertEqual(line(missing), "- - - -\n")
    }

    func testLiteralsBracesAndDollarSigns() throws {
        let template = try AccessTemplate("[${status}ms=${total_ms}] $$ \"$method $target\"")
        XCTAssertEqual(line(template), "[503ms=3.000] $ \"GET /a?b=1\"\n")
    }

    func testMistakesAreRefusedWithWhatIsKnown() {
        for (text, message) in [("$time $colour", "unknown field $colour (known: $time"), ("${status", "unclosed ${"),
                                ("just text", "names no field"), ("$", "unknown field $ ")] {
            XCTAssertThrowsError(try AccessTemplate(text), text) { error in
                XCTAssertTrue("\(error)".contains(message), "\(text): \(error)")
            }
        }
    }
}
