import CZstd
import EventLoop

/// zstd (RFC 8878) through the system libzstd.
public enum Zstd {
    /// zstd-encodes `input` in one frame that declares its size and ends
    /// with a checksum (as gzip's CRC-32, a stored copy that changed is
    /// found out), at level 3, zstd's default: faster than gzip's 6 and smaller.
    public static func compress(_ input: UnsafeRawBufferPointer, level: Int32 = 3) -> [UInt8] {
        EventLoop.assertOffLoop("compressing a whole body")
        let context = ZSTD_createCCtx()
        defer { ZSTD_freeCCtx(context) }
        ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level)
        ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1)
        var output = [UInt8](repeating: 0, count: ZSTD_compressBound(input.count))
        let written = output.withUnsafeMutableBytes { out in
            ZSTD_compress2(context, out.baseAddress, out.count, input.baseAddress, input.count)
        }
        precondition(ZSTD_isError(written) == 0, "zstd into its own bound failed")
        output.removeSubrange(written...)
        return output
    }

    /// The decoded size the first frame's header declares (Larder's own
    /// frames and most encoders' one-shot ones do); nil when it does not
    /// say, or `head` (the body's first bytes, 18 enough) is not a frame.
    /// A hint only: nothing is trusted until it decodes.
    public static func declaredSize(_ head: UnsafeRawBufferPointer) -> Int? {
        let n = larder_zstd_content_size(head.baseAddress, head.count)
        return n >= 0 ? Int(n) : nil
    }
}

/// zstd decoded piece by piece; frames one after another decode in turn.
public final class ZstdDecoder: ContentDecoder {
    private let context: OpaquePointer
    /// Between frames (none begun, or the last one ended).
    private var atFrameEnd = true
    private var started = false
    public private(set) var finished = false

    public init?() {
        guard let context = ZSTD_createDCtx() else { return nil }
        self.context = context
        // A frame may ask for a window of at most 8 MiB (RFC 8878's
        // recommendation for HTTP, section 3.1.1.1.2): a larger one is refused.
        ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, 23)
    }

    deinit { ZSTD_freeDCtx(context) }

    public func decode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
                       isLast: Bool) throws(CodingFailure) -> (consumed: Int, produced: Int) {
        var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
        var outBuffer = ZSTD_outBuffer(dst: output.baseAddress, size: output.count, pos: 0)
        while !finished && outBuffer.pos < outBuffer.size {
            if inBuffer.pos == inBuffer.size && atFrameEnd {
                if isLast {
                    guard started else { throw CodingFailure("empty body") }
                    finished = true
                }
                break
            }
            let before = (inBuffer.pos, outBuffer.pos)
            let hint = ZSTD_decompressStream(context, &outBuffer, &inBuffer)
            if ZSTD_isError(hint) != 0 { throw CodingFailure(String(cString: ZSTD_getErrorName(hint))) }
            started = true
            atFrameEnd = hint == 0
            if (inBuffer.pos, outBuffer.pos) == before {
                // Wants more input (or, with the frame ended and all flushed, nothing more).
                if inBuffer.pos == inBuffer.size && !atFrameEnd && isLast { throw CodingFailure("the zstd data is cut short") }
                break
            }
        }
        if !finished && isLast && inBuffer.pos == inBuffer.size && !atFrameEnd && outBuffer.pos < outBuffer.size {
            throw CodingFailure("the zstd data is cut short")
        }
        return (inBuffer.pos, outBuffer.pos)
    }
}
