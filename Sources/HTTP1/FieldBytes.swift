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

    @inlinable @inline(__always)
    public static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        for b in bytes where b >= 0x80 { return false }
        return true
    }
}
