import CCurl
import Synchronization

/// What gives descriptors back when an upstream connection's socket
/// cannot be opened for want of one (the disk tier's kept files): set once
/// by the daemon, asked on the worker that opens the socket.
public enum DescriptorRelief {
    private static let relief = Mutex<(@Sendable () -> Int)?>(nil)

    public static func install(_ body: @escaping @Sendable () -> Int) {
        relief.withLock { $0 = body }
        larder_set_descriptor_relief { DescriptorRelief.relief.withLock { $0 }.map { $0() } ?? 0 }
    }
}
