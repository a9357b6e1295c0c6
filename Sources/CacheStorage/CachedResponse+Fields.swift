extension CachedResponse {
    /// Each field a whole answer from this response sends (the stored head's
    /// fields with its Content-Length; not those kept for Larder alone), as
    /// the bytes stored: a protocol that does not send the stored head as it
    /// is (HTTP/2) builds its own from them.
    public func forEachStoredField(_ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Void) {
        HeadFields.forEach(in: headPrefix) { name, value in
            body(name, value)
            return true
        }
    }

    /// The head a whole answer sends (status line, fields, Content-Length)
    /// but the fields `drops` names (the bytes of a name as stored), as
    /// HTTP/1.1 lines appended to `out`; the per-request tail follows it.
    public func appendHead(dropping drops: (UnsafeRawBufferPointer) -> Bool, to out: inout [UInt8]) {
        let head = UnsafeRawBufferPointer(start: blockStart, count: headLength)
        var statusEnd = 0
        while statusEnd + 1 < head.count, !(head[statusEnd] == 0x0D && head[statusEnd + 1] == 0x0A) { statusEnd += 1 }
        out.append(contentsOf: head[..<min(head.count, statusEnd + 2)])
        HeadFields.forEach(in: head) { name, value in
            guard !drops(name) else { return true }
            let start = name.baseAddress! - head.baseAddress!, end = value.baseAddress! - head.baseAddress! + value.count
            out.append(contentsOf: head[start..<end])
            out.append(contentsOf: [0x0D, 0x0A])
            return true
        }
    }
}
