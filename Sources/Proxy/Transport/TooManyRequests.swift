import Bytes
import HTTP1
import HTTPHeaders

/// The 429 a rate limit answers with. A client flooding them must cost no
/// more than one asking for hits: HTTP/1.1 writes it in one pass from the
/// worker's scratch buffer into one output block (no head built field by
/// field); HTTP/2 and 3, and response rules that drop one of its fields,
/// take the made-here path every other answer made here takes.
enum TooManyRequests {
    static let message = "too many requests: over this client's rate limit"
    /// The body: the message and a newline, as every answer made here.
    static let bodyBytes = message.utf8.count + 1
}

extension AnswerQueue {
    func sendTooManyRequests(retryAfter: Int, for request: RequestHead) {
        let edits = answerEdits
        guard Head.sendsStoredHeadAsIs, !(edits.map { $0.drops("retry-after") || $0.drops("content-type") } ?? false) else {
            let extra: HeaderFields = [HeaderField(lowercasedName: "retry-after", value: String(retryAfter))]
            return sendMadeHere(status: 429, message: TooManyRequests.message, extra: extra, for: request)
        }
        let close = !request.keepAlive || services.draining
        let connection = ConnectionField(keepAlive: !close, minorVersion: request.minorVersion, altService: altService)
        services.headScratch.removeAll(keepingCapacity: true)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 160) { buffer in
            let start = buffer.baseAddress!
            var p = start
            ByteWriting.put("HTTP/1.1 429 Too Many Requests\r\nRetry-After: ", at: &p)
            ByteWriting.putDecimal(retryAfter, at: &p)
            ByteWriting.put("\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ", at: &p)
            ByteWriting.putDecimal(TooManyRequests.bodyBytes, at: &p)
            ByteWriting.put("\r\n", at: &p)
            services.headScratch.append(contentsOf: UnsafeBufferPointer(start: start, count: p - start))
        }
        edits?.appendLines(to: &services.headScratch)
        connection.append(to: &services.headScratch)
        services.headScratch.append(contentsOf: [0x0D, 0x0A])
        services.headScratch.append(contentsOf: TooManyRequests.message.utf8)
        services.headScratch.append(0x0A)
        services.headScratch.withUnsafeBytes { answer in
            if let copy = copied(count: answer.count, { $0.copyMemory(from: answer); return true }) {
                enqueue(copy.bytes, from: 0, to: copy.count)
            }
        }
    }
}
