import EventLoop
import CZlib

/// gzip (RFC 1952) through the system zlib: a whole buffer encoded (a
/// stored body, bounded by `max_object_size`); decoding goes piece by
/// piece (`GzipDecoder`), so a small body that inflates to gigabytes (a
/// "zip bomb") is never held whole.
public enum Gzip {
    public enum Failure: Error, Equatable {
        /// Not gzip, or corrupt, or cut short.
        case invalid(String)
    }

    /// gzip-encodes `input` (level 1 to 9; 6 is zlib's default balance).
    public static func compress(_ input: UnsafeRawBufferPointer, level: Int32 = 6) -> [UInt8] {
        EventLoop.assertOffLoop("compressing a whole body")  // (tens of milliseconds for a large one)
        var stream = z_stream()
        precondition(larder_deflate_init_gzip(&stream, level) == Z_OK, "zlib deflateInit2 failed")
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))) + 32)
        stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        let written = output.withUnsafeMutableBufferPointer { out -> Int in
            stream.next_out = out.baseAddress
            stream.avail_out = uInt(out.count)
            let status = deflate(&stream, Z_FINISH)
            precondition(status == Z_STREAM_END, "deflate into its own bound did not finish")
            return out.count - Int(stream.avail_out)
        }
        output.removeSubrange(written...)
        return output
    }
}
