import CZlib

/// gzip (RFC 1952) through the system zlib: whole buffers in, whole
/// buffers out. Stored responses are bounded (`max_object_size`), so one
/// call decodes one; the output is bounded too, so a small body that
/// inflates to gigabytes (a "zip bomb") is refused, not held.
public enum Gzip {
    public enum Failure: Error, Equatable {
        /// Not gzip, or corrupt, or cut short.
        case invalid(String)
        /// It would decode to more than the limit.
        case tooLarge(limit: Int)
    }

    /// The decoded bytes of a gzip body (members one after another, as
    /// RFC 1952 allows, are decoded in turn).
    public static func decompress(_ input: UnsafeRawBufferPointer, limit: Int) throws(Failure) -> [UInt8] {
        var stream = z_stream()
        guard larder_inflate_init_gzip(&stream) == Z_OK else { throw .invalid("zlib could not start") }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        output.reserveCapacity(min(limit, max(input.count * 4, 4096)))
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        guard let base = input.baseAddress, !input.isEmpty else { throw .invalid("empty body") }
        stream.next_in = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        while true {
            let status = chunk.withUnsafeMutableBufferPointer { out -> Int32 in
                stream.next_out = out.baseAddress
                stream.avail_out = uInt(out.count)
                return inflate(&stream, Z_NO_FLUSH)
            }
            let produced = chunk.count - Int(stream.avail_out)
            guard output.count + produced <= limit else { throw .tooLarge(limit: limit) }
            output.append(contentsOf: chunk[0..<produced])
            switch status {
            case Z_STREAM_END:
                // Another member may follow; trailing zero padding is tolerated.
                guard stream.avail_in > 0 else { return output }
                let rest = UnsafeRawBufferPointer(start: stream.next_in, count: Int(stream.avail_in))
                if rest.allSatisfy({ $0 == 0 }) { return output }
                guard inflateReset(&stream) == Z_OK else { throw .invalid("zlib could not go on") }
            case Z_OK:
                continue
            case Z_BUF_ERROR where stream.avail_in == 0:
                throw .invalid("the gzip data is cut short")
            default:
                throw .invalid(stream.msg.map { String(cString: $0) } ?? "zlib error \(status)")
            }
        }
    }

    /// gzip-encodes `input` (level 1 to 9; 6 is zlib's default balance).
    public static func compress(_ input: UnsafeRawBufferPointer, level: Int32 = 6) -> [UInt8] {
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
