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
