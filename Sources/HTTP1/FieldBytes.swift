/// Field values (and reason phrases) are bytes: RFC 9110 section 5.5 allows
/// obs-text (0x80-0xFF) in them, and it need not be UTF-8. Larder carries
/// them as Strings with one Unicode scalar per byte (ISO-8859-1), so every
/// byte sequence survives the trip from one socket to another unchanged;
/// decoding as UTF-8 would replace invalid bytes with U+FFFD. ASCII, nearly
/// every field, reads the same either way and takes the fast path.
public enum FieldBytes {
    /// The String holding these bytes, one scalar per byte.
    @inlinable
    public static func string(_ bytes: UnsafeRawBufferPointer) -> String {
        if isASCII(bytes) { return String(decoding: bytes, as: UTF8.self) }
        var scalars = String.UnicodeScalarView()
        for b in bytes { scalars.append(Unicode.Scalar(b)) }
        return String(scalars)
    }

    /// The bytes a String from `string(_:)` was made of. Scalars above
    /// U+00FF (only in values Larder itself writes) go out as UTF-8.
    public static func append(_ value: String, to out: inout [UInt8]) {
        var value = value
        let ascii = value.withUTF8 { u -> Bool in
            guard isASCII(UnsafeRawBufferPointer(u)) else { return false }
            out.append(contentsOf: u)
            return true
        }
        if ascii { return }
        for scalar in value.unicodeScalars {
            if scalar.value <= 0xFF { out.append(UInt8(scalar.value)) } else { out.append(contentsOf: String(scalar).utf8) }
        }
    }

    /// Calls `body` with the bytes of `value` (without copying when ASCII).
    public static func withBytes<R>(_ value: String, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        var value = value
        if let result = value.withUTF8({ u -> R? in
            let raw = UnsafeRawBufferPointer(u)
            return isASCII(raw) ? body(raw) : nil
        }) { return result }
        var bytes: [UInt8] = []
        append(value, to: &bytes)
        return bytes.withUnsafeBytes(body)
    }

    /// Eight bytes at a time: this runs for every field value parsed.
    @inlinable
    public static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var i = 0
        var high: UInt64 = 0
        while i + 8 <= bytes.count {
            high |= base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < bytes.count {
            high |= UInt64(base.load(fromByteOffset: i, as: UInt8.self))
            i += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }
}
