/// Bounds on what a client may send. Every parser loop is bounded by these.
public struct ParseLimits: Sendable {
    /// Longest request target accepted (414 beyond).
    public var maxTargetBytes: Int
    /// Largest header section, request line included (431 beyond).
    public var maxHeaderBytes: Int
    /// Most header fields (431 beyond).
    public var maxHeaderCount: Int
    /// Largest request body (413 beyond).
    public var maxBodyBytes: Int

    public init(maxTargetBytes: Int = 8192, maxHeaderBytes: Int = 32768,
                maxHeaderCount: Int = 100, maxBodyBytes: Int = 64 << 20) {
        self.maxTargetBytes = maxTargetBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.maxHeaderCount = maxHeaderCount
        self.maxBodyBytes = maxBodyBytes
    }
}
