#if canImport(Glibc)
import Glibc
#endif

/// Pieces written at a cursor (room made beforehand).
public enum ByteWriting {
    @inlinable @inline(__always)
    public static func put(_ text: StaticString, at p: inout UnsafeMutablePointer<UInt8>) {
        let n = text.utf8CodeUnitCount
        memcpy(p, text.utf8Start, n)
        p += n
    }

    /// Most texts of a line are short: up to 16 bytes are two overlapping
    /// unaligned moves, not a call.
    @inlinable @inline(__always)
    public static func put(_ bytes: UnsafeBufferPointer<UInt8>, at p: inout UnsafeMutablePointer<UInt8>) {
        guard let from = bytes.baseAddress else { return }
        let n = bytes.count, source = UnsafeRawPointer(from), destination = UnsafeMutableRawPointer(p)
        if n >= 8 && n <= 16 {
            let (head, tail) = (source.loadUnaligned(as: UInt64.self), source.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self))
            destination.storeBytes(of: head, as: UInt64.self)
            destination.storeBytes(of: tail, toByteOffset: n - 8, as: UInt64.self)
        } else if n >= 4 && n < 8 {
            let (head, tail) = (source.loadUnaligned(as: UInt32.self), source.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self))
            destination.storeBytes(of: head, as: UInt32.self)
            destination.storeBytes(of: tail, toByteOffset: n - 4, as: UInt32.self)
        } else if n < 4 {
            for i in 0..<n { p[i] = from[i] }
        } else {
            memcpy(p, from, n)
        }
        p += n
    }

    /// A non-negative decimal (a negative one as 0: no figure here is
    /// negative), two digits at a time.
    @inlinable @inline(__always)
    public static func putDecimal(_ value: Int, at p: inout UnsafeMutablePointer<UInt8>) {
        var n = UInt(max(0, value))
        let digits = n < 10 ? 1 : n < 100 ? 2 : n < 1000 ? 3 : n < 10_000 ? 4 : decimalDigits(n)
        var q = p + digits
        p = q
        let pairs: StaticString = """
            0001020304050607080910111213141516171819202122232425262728293031323334353637383940414243444546474849\
            5051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899
            """
        while n >= 10 {
            let pair = Int(n % 100) * 2
            n /= 100
            q -= 2
            q[0] = pairs.utf8Start[pair]
            q[1] = pairs.utf8Start[pair + 1]
        }
        if q > p - digits {
            q -= 1
            q.pointee = UInt8(truncatingIfNeeded: 48 &+ n)
        }
    }

    @usableFromInline
    static func decimalDigits(_ n: UInt) -> Int {
        var digits = 1, m = n
        while m >= 10 { digits += 1; m /= 10 }
        return digits
    }

    /// Microseconds as milliseconds with three decimals (1.234).
    @inlinable @inline(__always)
    public static func putMilliseconds(_ microseconds: Int, at p: inout UnsafeMutablePointer<UInt8>) {
        let micros = max(0, microseconds)
        putDecimal(micros / 1000, at: &p)
        let fraction = micros % 1000
        p[0] = UInt8(ascii: ".")
        p[1] = UInt8(truncatingIfNeeded: 48 + fraction / 100)
        p[2] = UInt8(truncatingIfNeeded: 48 + fraction / 10 % 10)
        p[3] = UInt8(truncatingIfNeeded: 48 + fraction % 10)
        p += 4
    }

    /// The inside of a JSON string: quotes, backslashes and control bytes
    /// escaped, a byte above 0x7E as \u00XX (a target is bytes, not UTF-8),
    /// so every line is valid JSON whatever the request carried. Needs room
    /// for six bytes per byte.
    @inlinable @inline(__always)
    public static func putJSONEscaped(_ bytes: UnsafeBufferPointer<UInt8>, at p: inout UnsafeMutablePointer<UInt8>) {
        // The usual text needs no escape: checked a word at a time, copied whole.
        if isPlain(bytes) { return put(bytes, at: &p) }
        for byte in bytes {
            if isPlain(byte) {
                p.pointee = byte
                p += 1
            } else {
                putEscape(byte, at: &p)
            }
        }
    }

    /// Whether every byte is plain: eight at a time (the last word
    /// overlapping the one before), short texts in two halves.
    @inlinable @inline(__always)
    public static func isPlain(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let start = bytes.baseAddress else { return true }
        let n = bytes.count, base = UnsafeRawPointer(start)
        if n < 4 { return bytes.allSatisfy(isPlain) }
        if n < 8 {
            let low = UInt64(base.loadUnaligned(as: UInt32.self)), high = UInt64(base.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self))
            return wordIsPlain(low | high << 32)
        }
        var i = 0
        while i + 8 < n {
            if !wordIsPlain(base.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { return false }
            i += 8
        }
        return wordIsPlain(base.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self))
    }

    /// No byte of `x` below 0x20, above 0x7E, a quote or a backslash (the
    /// usual bit tricks for "has a byte less than / more than / equal to";
    /// each is exact as a yes or no).
    @usableFromInline @inline(__always)
    static func wordIsPlain(_ x: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        let below = (x &- ones &* 0x20) & ~x & highs
        let above = ((x &+ ones) | x) & highs
        let quote = x ^ (ones &* 0x22), backslash = x ^ (ones &* 0x5C)
        let quotes = (quote &- ones) & ~quote & highs
        let backslashes = (backslash &- ones) & ~backslash & highs
        return below | above | quotes | backslashes == 0
    }

    /// Printable ASCII other than the quote and the backslash.
    @usableFromInline @inline(__always)
    static func isPlain(_ byte: UInt8) -> Bool {
        byte &- 0x20 < 0x5F && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }

    @usableFromInline
    static func putEscape(_ byte: UInt8, at p: inout UnsafeMutablePointer<UInt8>) {
        if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            p[0] = UInt8(ascii: "\\")
            p[1] = byte
            p += 2
            return
        }
        let hex: StaticString = "0123456789abcdef"
        put("\\u00", at: &p)
        p[0] = hex.utf8Start[Int(byte >> 4)]
        p[1] = hex.utf8Start[Int(byte & 0xF)]
        p += 2
    }
}
