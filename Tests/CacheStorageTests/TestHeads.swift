import HTTPHeaders
import CacheSemantics
@testable import CacheStorage

/// A stored head as the proxy would build it: a status line and fields.
func testHead(_ key: String, status: Int = 200, fields: HeaderFields = ["cache-control": "max-age=60"],
              timing: ResponseTiming = ResponseTiming(requestTime: 1, responseTime: 1, dateValue: 1, ageValue: 0),
              lifetime: Int = 60, varyNames: [String] = [], varyValues: [String?] = [], tags: [String] = []) -> StoredHead {
    var prefix = Array("HTTP/1.1 \(status) OK\r\n".utf8)
    for field in fields { prefix += Array("\(field.name): \(field.value)\r\n".utf8) }
    return StoredHead(key: key, status: status, headPrefix: prefix, timing: timing, lifetime: lifetime,
                      directives: PackedCacheControl(CacheControl("max-age=\(lifetime)")), hasValidator: false,
                      varyNames: varyNames, varyValues: varyValues, tags: tags)
}

/// A file name of the key `variant` stands for (the index's tests name
/// variants "a", "b", ...).
func fileName(_ variant: String) -> FileName { DiskTier.fileName("/k", varyValues: [variant]) }

/// Stored files' names as strings, formatted here independently of
/// `FileName` (the format every earlier build wrote: 16 hex digits each).
extension DiskTier {
    static func keyHash(_ key: String) -> String { hex(keyHashValue(key)) }

    static func variantHash(_ values: [String?]) -> String { hex(variantHashValue(values)) }

    /// The sub-directory of the key whose hash is `keyHash`.
    static func subdirectory(_ keyHash: String) -> String { String(keyHash.prefix(2)) }

    private static func hex(_ v: UInt64) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }
}
