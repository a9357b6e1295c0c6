import CBrotli
import EventLoop

/// brotli (RFC 7932) through the system libbrotli.
public enum Brotli {
    /// brotli-encodes `input` (quality 5: within a few percent of the
    /// smallest for text at a fraction of quality 11's time; the copy is
    /// made once, off the loop).
    public static func compress(_ input: UnsafeRawBufferPointer, quality: Int32 = 5) -> [UInt8] {
        EventLoop.assertOffLoop("compressing a whole body")
        var size = BrotliEncoderMaxCompressedSize(input.count)
        if size == 0 { size = input.count + 1024 }  // (0: the bound would overflow)
        var output = [UInt8](repeating: 0, count: size)
        let done = output.withUnsafeMutableBufferPointer { out in
            BrotliEncoderCompress(quality, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC, input.count,
                                  input.baseAddress?.assumingMemoryBound(to: UInt8.self), &size, out.baseAddress)
        }
        precondition(done == BROTLI_TRUE, "brotli into its own bound failed")
        output.removeSubrange(size...)
        return output
    }
}

/// brotli decoded piece by piece. Bytes after the stream's end are an error
/// (RFC 7932 section 10: a decoder may reject them; a stored body is one stream).
public final class BrotliDecoder: ContentDecoder {
    private let state: OpaquePointer
    private var started = false
    private var ended = false
    public private(set) var finished = false

    public init?() {
        guard let state = BrotliDecoderCreateInstance(nil, nil, nil) else { return nil }
        self.state = state
    }

    deinit { BrotliDecoderDestroyInstance(state) }

    public func decode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
                       isLast: Bool) throws(CodingFailure) -> (consumed: Int, produced: Int) {
        guard !finished else { return (0, 0) }
        if ended {
            guard input.isEmpty else { throw CodingFailure("bytes after the brotli stream's end") }
            if isLast { finished = true }
            return (0, 0)
        }
        var availableIn = input.count, availableOut = output.count
        var nextIn = input.baseAddress?.assumingMemoryBound(to: UInt8.self)
        var nextOut = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let result = BrotliDecoderDecompressStream(state, &availableIn, &nextIn, &availableOut, &nextOut, nil)
        let consumed = input.count - availableIn, produced = output.count - availableOut
        if consumed > 0 { started = true }
        switch result {
        case BROTLI_DECODER_RESULT_SUCCESS:
            ended = true
            if availableIn > 0 { throw CodingFailure("bytes after the brotli stream's end") }
            if isLast { finished = true }
        case BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT:
            if isLast { throw CodingFailure(started ? "the brotli data is cut short" : "empty body") }
        case BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT:
            break
        default:
            throw CodingFailure(String(cString: BrotliDecoderErrorString(BrotliDecoderGetErrorCode(state))))
        }
        return (consumed, produced)
    }
}
