import Synchronization

/// A listener's current certificates, shared by every worker: each
/// accepted connection takes the context in it, and a reload puts a new one
/// in (connections already open keep theirs).
public final class TLSContextSlot: Sendable {
    private let slot: Mutex<TLSContext>

    public init(_ context: TLSContext) { slot = Mutex(context) }

    public var context: TLSContext { slot.withLock { $0 } }

    public func replace(with context: TLSContext) { slot.withLock { $0 = context } }
}
