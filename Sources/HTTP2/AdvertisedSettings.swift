/// RFC 9113 section 5.1.2 makes a stream beyond the advertised
/// SETTINGS_MAX_CONCURRENT_STREAMS a stream error (REFUSED_STREAM), but
/// libnghttp2 ends the whole connection once its own value is
/// acknowledged (every stream of it lost). So the library is given a
/// higher, hard bound, the client is told the real limit (the session's
/// first SETTINGS frame rewritten as it leaves), and the delegate refuses
/// streams past the real limit one by one.
enum AdvertisedSettings {
    /// The library's own bound for a limit of `advertised`: beyond it a
    /// client that ignores REFUSED_STREAM loses its connection.
    static func hardBound(_ advertised: Int) -> Int { advertised + max(advertised, 128) }

    /// In `bytes` (whole frames, as the session hands them out): the first
    /// SETTINGS frame that is not an ACK gets `value` for
    /// SETTINGS_MAX_CONCURRENT_STREAMS. True when one was found.
    static func rewrite(_ bytes: inout [UInt8], maxConcurrentStreams value: UInt32) -> Bool {
        var at = 0
        while at + 9 <= bytes.count {
            let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            let type = bytes[at + 3], flags = bytes[at + 4]
            guard at + 9 + length <= bytes.count else { return false }
            if type == 0x4 && flags & 0x1 == 0 {
                var entry = at + 9
                while entry + 6 <= at + 9 + length {
                    if bytes[entry] == 0 && bytes[entry + 1] == 0x3 {
                        for i in 0..<4 { bytes[entry + 2 + i] = UInt8(truncatingIfNeeded: value >> (8 * (3 - i))) }
                    }
                    entry += 6
                }
                return true
            }
            at += 9 + length
        }
        return false
    }
}
