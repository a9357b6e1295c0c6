#if canImport(Glibc)
import Glibc
#endif

/// The field names response rules drop, matched against a stored head's
/// lines on every hit: a line is one of them when it starts with the
/// name, in any case, and a colon (no scan for the colon, no String made).
/// A plain value over bytes its `EdgeRules` owns: copied for free, read
/// without reference counting on the hit path.
public struct FieldNames {
    /// The names, lowercased, end to end; each one's start and length.
    private let bytes: UnsafeMutablePointer<UInt8>?
    private let spans: UnsafeMutablePointer<(start: Int, count: Int)>?
    public let count: Int
    /// The names' first bytes, one bit each: most lines are passed by one test.
    private let firstBytes: (UInt64, UInt64)

    public var isEmpty: Bool { count == 0 }

    /// Allocates; `deallocate` frees (the owner's deinit).
    public init(_ lowercased: [String]) {
        let names = lowercased.map { Array($0.utf8) }
        count = names.count
        let total = names.reduce(0) { $0 + $1.count }
        let storage: UnsafeMutablePointer<UInt8>? = total > 0 ? .allocate(capacity: total) : nil
        let table: UnsafeMutablePointer<(start: Int, count: Int)>? = names.isEmpty ? nil : .allocate(capacity: names.count)
        (bytes, spans) = (storage, table)
        var bits: (UInt64, UInt64) = (0, 0), start = 0
        for (i, name) in names.enumerated() {
            for (j, byte) in name.enumerated() { storage![start + j] = byte }
            table![i] = (start, name.count)
            start += name.count
            if let first = name.first, first < 0x80 {
                if first < 64 { bits.0 |= 1 << UInt64(first) } else { bits.1 |= 1 << UInt64(first - 64) }
            }
        }
        firstBytes = bits
    }

    public func deallocate() {
        bytes?.deallocate()
        spans?.deallocate()
    }

    @inline(__always)
    private static func lower(_ byte: UInt8) -> UInt8 { byte &- 0x41 < 26 ? byte | 0x20 : byte }

    @inline(__always)
    private func mayStart(_ byte: UInt8) -> Bool {
        let c = Self.lower(byte)
        guard c < 0x80 else { return false }
        return c < 64 ? firstBytes.0 & (1 << UInt64(c)) != 0 : firstBytes.1 & (1 << UInt64(c - 64)) != 0
    }

    /// Whether `p` starts with name `i` (any case).
    @inline(__always)
    private func equals(_ p: UnsafePointer<UInt8>, name i: Int) -> Bool {
        let (start, length) = spans![i]
        let name = bytes! + start
        for j in 0..<length where Self.lower(p[j]) != name[j] { return false }
        return true
    }

    /// Whether a name's bytes (any case) are one.
    public func contains(bytes name: UnsafeRawBufferPointer) -> Bool {
        guard let base = name.baseAddress, count > 0 else { return false }
        let p = base.assumingMemoryBound(to: UInt8.self)
        for i in 0..<count where spans![i].count == name.count && equals(p, name: i) { return true }
        return false
    }

    /// Whether a lowercased name is one.
    public func contains(_ name: String) -> Bool {
        guard count > 0 else { return false }
        var name = name
        return name.withUTF8 { contains(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Whether the line at `p` (`length` bytes) is a field of one of the names.
    @inline(__always)
    private func names(line p: UnsafePointer<UInt8>, length: Int) -> Bool {
        guard mayStart(p[0]) else { return false }
        for i in 0..<count {
            let n = spans![i].count
            if length > n && p[n] == UInt8(ascii: ":") && equals(p, name: i) { return true }
        }
        return false
    }

    /// A head as HTTP/1.1 lines (its status line, then fields) appended to
    /// `out` without the fields named: the runs of lines between them are
    /// copied whole.
    public func appendHead(_ head: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        guard let raw = head.baseAddress, head.count > 0 else { return }
        let base = raw.assumingMemoryBound(to: UInt8.self), total = head.count
        var line = Self.lineEnd(base, from: 0, total)  // the status line stays
        var run = 0
        while line < total {
            let end = Self.lineEnd(base, from: line, total)
            if names(line: base + line, length: end - line) {
                if line > run { out.append(contentsOf: UnsafeBufferPointer(start: base + run, count: line - run)) }
                run = end
            }
            line = end
        }
        if total > run { out.append(contentsOf: UnsafeBufferPointer(start: base + run, count: total - run)) }
    }

    @inline(__always)
    private static func lineEnd(_ base: UnsafePointer<UInt8>, from start: Int, _ total: Int) -> Int {
        guard let found = memchr(UnsafeRawPointer(base + start), 0x0A, total - start) else { return total }
        return UnsafeRawPointer(found) - UnsafeRawPointer(base) + 1
    }
}
