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
}
