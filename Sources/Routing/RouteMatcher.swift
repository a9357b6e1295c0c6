#if canImport(Glibc)
import Glibc
#endif

/// The routes' prefixes and host patterns as flat bytes, in match order: a
/// match compares bytes (no Characters, no String made) and touches no
/// reference count, so the memory tier's hits, which ask for a key's
/// lifetime, write nothing shared. Immutable once made.
public final class RouteMatcher: @unchecked Sendable {
    private struct Entry {
        var prefixStart: Int32, prefixCount: Int32
        /// The route's host patterns: `patterns[hostsStart ..< hostsStart + hostCount]`.
        var hostsStart: Int32, hostCount: Int32
        /// Methods or a glob: `more` is asked.
        var needsMore: Bool
    }
    private struct Pattern {
        var start: Int32, count: Int32
        /// "*.example.com": stored as ".example.com", matched as a longer suffix.
        var wildcard: Bool
    }
    private let bytes: UnsafeMutableRawBufferPointer
    private let entries: UnsafeMutableBufferPointer<Entry>
    private let patterns: UnsafeMutableBufferPointer<Pattern>
    /// Routes (the buffers are never empty, so this is kept apart).
    public let count: Int

    public init(_ routes: [Route]) {
        var flat: [UInt8] = [], entries: [Entry] = [], patterns: [Pattern] = []
        for route in routes {
            let start = Int32(flat.count)
            flat += route.prefix.utf8
            let entry = Entry(prefixStart: start, prefixCount: Int32(route.prefix.utf8.count), hostsStart: Int32(patterns.count),
                              hostCount: Int32(route.hosts.count), needsMore: !route.methods.isEmpty || route.glob != nil)
            for host in route.hosts {
                let wildcard = host.hasPrefix("*.")
                let text = wildcard ? host.utf8.dropFirst() : host.utf8[...]
                patterns.append(Pattern(start: Int32(flat.count), count: Int32(text.count), wildcard: wildcard))
                flat += text
            }
            entries.append(entry)
        }
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: max(flat.count, 1), alignment: 8)
        flat.withUnsafeBytes { if $0.count > 0 { bytes.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        self.bytes = bytes
        self.entries = .allocate(capacity: max(entries.count, 1))
        self.entries.initialize(from: entries + (entries.isEmpty ? [Entry(prefixStart: 0, prefixCount: 0, hostsStart: 0, hostCount: 0,
                                                                            needsMore: false)] : []))
        self.patterns = .allocate(capacity: max(patterns.count, 1))
        self.patterns.initialize(from: patterns + (patterns.isEmpty ? [Pattern(start: 0, count: 0, wildcard: false)] : []))
        count = entries.count
    }

    deinit {
        bytes.deallocate()
        entries.deallocate()
        patterns.deallocate()
    }

    /// The first route (index) whose prefix starts `path` and, where it names
    /// hosts, one of which `host` matches (nil: none); `more` is asked for
    /// routes with methods or a glob.
    public func first(path: UnsafeRawBufferPointer, host: UnsafeRawBufferPointer?, more: (Int) -> Bool) -> Int? {
        let base = UnsafeRawPointer(bytes.baseAddress!)
        for i in 0..<count {
            let e = entries[i]
            let n = Int(e.prefixCount)
            guard n <= path.count, n == 0 || memcmp(path.baseAddress!, base + Int(e.prefixStart), n) == 0 else { continue }
            if e.hostCount > 0 {
                guard let host, hostMatches(host, Int(e.hostsStart), Int(e.hostCount), base) else { continue }
            }
            if e.needsMore && !more(i) { continue }
            return i
        }
        return nil
    }

    private func hostMatches(_ host: UnsafeRawBufferPointer, _ start: Int, _ count: Int, _ base: UnsafeRawPointer) -> Bool {
        for p in patterns[start ..< start + count] {
            let n = Int(p.count)
            if p.wildcard {
                guard host.count > n, memcmp(host.baseAddress! + (host.count - n), base + Int(p.start), n) == 0 else { continue }
                return true
            }
            if host.count == n && (n == 0 || memcmp(host.baseAddress!, base + Int(p.start), n) == 0) { return true }
        }
        return false
    }
}
