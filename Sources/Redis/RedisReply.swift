import CHiredis

/// One reply from Redis, copied out of hiredis's (which it frees after the
/// callback). An error reply (`-ERR ...`) is a reply, not a failure: the
/// connection is fine.
public enum RedisReply: Equatable, Sendable {
    case status(String)
    case error(String)
    case integer(Int)
    case string([UInt8])
    case array([RedisReply])
    case null

    init(_ reply: UnsafePointer<redisReply>) {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STATUS: self = .status(Self.text(r))
        case REDIS_REPLY_ERROR: self = .error(Self.text(r))
        case REDIS_REPLY_INTEGER: self = .integer(Int(r.integer))
        case REDIS_REPLY_STRING: self = .string(r.str.map { Array(UnsafeRawBufferPointer(start: $0, count: r.len)) } ?? [])
        case REDIS_REPLY_ARRAY:
            self = .array((0..<r.elements).compactMap { r.element[$0].map { RedisReply(UnsafePointer($0)) } })
        default: self = .null
        }
    }

    private static func text(_ r: redisReply) -> String {
        r.str.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: r.len), as: UTF8.self) } ?? ""
    }

    /// A bulk string, status or integer as text.
    public var text: String? {
        switch self {
        case .string(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .status(let text): return text
        case .integer(let n): return String(n)
        default: return nil
        }
    }

    public var elements: [RedisReply] {
        if case .array(let items) = self { return items }
        return []
    }
}

/// The connection failed (could not connect, was refused by AUTH, timed
/// out, was closed by the server): every command waiting on it gets this.
public struct RedisError: Error, Equatable, CustomStringConvertible, Sendable {
    public let description: String
    /// The server is not (or no longer) the master: it says it is a
    /// replica (`ROLE`) or refused a write with READONLY.
    public let isNotMaster: Bool
    public init(_ description: String, notMaster: Bool = false) {
        self.description = description
        isNotMaster = notMaster
    }
}

extension RedisReply {
    /// A write refused by a replica (`-READONLY ...`): the master moved.
    public var isReadOnlyError: Bool {
        if case .error(let message) = self { return message.hasPrefix("READONLY") }
        return false
    }
}
