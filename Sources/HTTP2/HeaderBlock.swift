/// A head's fields for nghttp2, in one buffer: `:status` first, then each
/// name (lower case) and value as bytes, and where each lies. The proxy
/// builds it straight from its fields (no HTTP/1.1 text between); the
/// session hands nghttp2 pointers into it, which it copies.
public struct HeaderBlock {
    public private(set) var bytes: [UInt8] = []
    private var spans: [(name: Int, nameLength: Int, value: Int, valueLength: Int)] = []

    public init(status: Int) {
        bytes.reserveCapacity(512)
        spans.reserveCapacity(16)
        append(name: ":status") { out in
            // Three digits (RFC 9110 section 15); anything else is Larder's 502.
            let code = (100...999).contains(status) ? status : 502
            out += [UInt8(0x30 + code / 100), UInt8(0x30 + code / 10 % 10), UInt8(0x30 + code % 10)]
        }
    }

    /// The fields' count, `:status` included.
    public var count: Int { spans.count }

    /// Appends a field: `name` (made lower case), its value written by `value`.
    public mutating func append(name: some Collection<UInt8>, value: (inout [UInt8]) -> Void) {
        let nameStart = bytes.count
        for c in name { bytes.append(c >= 0x41 && c <= 0x5A ? c | 0x20 : c) }
        let valueStart = bytes.count
        value(&bytes)
        spans.append((nameStart, valueStart - nameStart, valueStart, bytes.count - valueStart))
    }

    public mutating func append(name: String, value: (inout [UInt8]) -> Void) { append(name: name.utf8, value: value) }

    /// The field at `index`: its name and value, as text (for tests and logs).
    public func field(_ index: Int) -> (name: String, value: String) {
        let s = spans[index]
        return (String(decoding: bytes[s.name..<(s.name + s.nameLength)], as: UTF8.self),
                String(decoding: bytes[s.value..<(s.value + s.valueLength)], as: UTF8.self))
    }

    /// Every field as text, in order.
    public var fields: [(name: String, value: String)] { (0..<count).map(field) }

    /// Calls `body` with each field's name and value bytes, valid during the call.
    public func withFields(_ body: (UnsafeRawBufferPointer, [(name: Int, nameLength: Int, value: Int, valueLength: Int)]) -> Void) {
        bytes.withUnsafeBytes { body($0, spans) }
    }
}
