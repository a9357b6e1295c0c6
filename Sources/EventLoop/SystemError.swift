#if canImport(Glibc)
import Glibc
#endif

/// An operating-system error from the C loop or a socket call: the errno and
/// the operation that failed. The rest of Larder never sees raw return codes.
public struct SystemError: Error, CustomStringConvertible, Equatable {
    public let errno: Int32
    public let operation: String

    public init(errno: Int32, operation: String) {
        self.errno = errno
        self.operation = operation
    }

    public var description: String {
        "\(operation): \(String(cString: strerror(errno)))"
    }

    public var wouldBlock: Bool { errno == EAGAIN || errno == EWOULDBLOCK }
}

/// Turns the C shim's "negative errno" convention into a typed throw.
@inline(__always)
func check(_ result: Int, _ operation: @autoclosure () -> String) throws(SystemError) -> Int {
    if result < 0 { throw SystemError(errno: Int32(-result), operation: operation()) }
    return result
}
