import Synchronization

/// `$request_id`: 32 hex digits, unique in the process and not guessable
/// from another (a counter shared by the workers, mixed with a seed drawn
/// at start-up), as nginx's `$request_id` looks.
public enum RequestID {
    private static let counter = Atomic<UInt64>(0)
    private static let seed = (UInt64.random(in: .min ... .max), UInt64.random(in: .min ... .max))

    public static func next() -> String {
        let n = counter.wrappingAdd(1, ordering: .relaxed).newValue
        return hex(RateLimiter.mix(n ^ seed.0)) + hex(RateLimiter.mix(n &+ seed.1))
    }

    static func hex(_ value: UInt64) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: 16) { buffer in
            for i in 0..<16 { buffer[i] = digits[Int((value >> UInt64(60 - 4 * i)) & 0xF)] }
            return 16
        }
    }
}
