import CZlib

/// gzip (RFC 1952) decoded piece by piece: the caller hands in compressed
/// bytes as it has them and room for output, and gets back how much of
/// each was used, so a stored body is decoded as its client drains, never
/// whole. Members one after another decode in turn; zero padding after
/// the last is tolerated. zlib keeps a pointer to its stream, so the
/// stream lives on the heap, never moved.
public final class GzipDecoder: ContentDecoder {
    private let stream: UnsafeMutablePointer<z_stream>
    /// The last member ended; another may follow.
    private var betweenMembers = false
    /// At least one member began.
    private var started = false
    /// The input is over and every member ended.
    public private(set) var finished = false

    public init() throws(Gzip.Failure) {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        guard larder_inflate_init_gzip(stream) == Z_OK else {
            stream.deallocate()
            throw .invalid("zlib could not start")
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
    }

    /// Decodes from `input` into `output`: how many input bytes were used
    /// and output bytes written. Call again with the rest of the input
    /// (and more) while output fills; `isLast`: `input` reaches the end of
    /// the body, so a member that does not end there is cut short.
    /// Throws for data that is not gzip, corrupt, or cut short.
    public func decode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
                       isLast: Bool) throws(CodingFailure) -> (consumed: Int, produced: Int) {
        var consumed = 0, produced = 0
        while !finished && produced < output.count {
            if betweenMembers || !started {
                // Zero padding may follow the last member; anything else starts one.
                if started { while consumed < input.count && input[consumed] == 0 { consumed += 1 } }
                if consumed == input.count {
                    if isLast {
                        guard started else { throw CodingFailure("empty body") }
                        finished = true
                    }
                    break
                }
                if started { guard inflateReset(stream) == Z_OK else { throw CodingFailure("zlib could not go on") } }
                (betweenMembers, started) = (false, true)
            }
            stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress!.advanced(by: consumed)
                .assumingMemoryBound(to: Bytef.self))
            stream.pointee.avail_in = uInt(input.count - consumed)
            stream.pointee.next_out = output.baseAddress!.advanced(by: produced).assumingMemoryBound(to: Bytef.self)
            stream.pointee.avail_out = uInt(output.count - produced)
            let status = inflate(stream, Z_NO_FLUSH)
            consumed = input.count - Int(stream.pointee.avail_in)
            produced = output.count - Int(stream.pointee.avail_out)
            switch status {
            case Z_STREAM_END:
                betweenMembers = true
            case Z_OK:
                continue
            case Z_BUF_ERROR where consumed == input.count:
                // Wants more input.
                if isLast { throw CodingFailure("the gzip data is cut short") }
                return (consumed, produced)
            case Z_BUF_ERROR:
                return (consumed, produced)  // wants more room
            default:
                throw CodingFailure(stream.pointee.msg.map { String(cString: $0) } ?? "zlib error \(status)")
            }
        }
        return (consumed, produced)
    }
}

extension Gzip {
    /// The uncompressed size a gzip body's last member declares (its
    /// trailer's ISIZE, modulo 2^32): the whole size when the body is one
    /// member, as stored responses are. A hint only: nothing is trusted
    /// until it decodes.
    public static func declaredSize(_ body: UnsafeRawBufferPointer) -> Int? {
        guard body.count >= 18 else { return nil }
        let at = body.count - 4
        return Int(body[at]) | Int(body[at + 1]) << 8 | Int(body[at + 2]) << 16 | Int(body[at + 3]) << 24
    }
}
