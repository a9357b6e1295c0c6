#if canImport(Glibc)
import Glibc
#endif

/// `POST /purge?regex=RE`: a POSIX extended regular expression (`regcomp`,
/// the C library's engine) matched against each stored URL's path and
/// query (a key's target, without the host or body digest that some keys
/// carry after it). Compiled once per purge, read by any thread.
public final class PurgePattern: @unchecked Sendable, Equatable, CustomStringConvertible {
    public let source: String
    private var compiled = regex_t()
    /// Longer patterns are refused: each is matched against every stored key.
    public static let maxLength = 1024

    /// The pattern, or why it cannot be used (the engine's own words).
    public static func compile(_ source: String) -> Result<PurgePattern, PatternError> {
        guard !source.isEmpty else { return .failure(PatternError(message: "the regular expression is empty")) }
        guard source.utf8.count <= maxLength else {
            return .failure(PatternError(message: "the regular expression is longer than \(maxLength) bytes"))
        }
        guard !source.utf8.contains(0) else { return .failure(PatternError(message: "the regular expression holds a NUL byte")) }
        let pattern = PurgePattern(source: source)
        let status = regcomp(&pattern.compiled, source, REG_EXTENDED | REG_NOSUB)
        guard status == 0 else {
            var text = [CChar](repeating: 0, count: 256)
            regerror(status, &pattern.compiled, &text, text.count)
            pattern.isCompiled = false
            return .failure(PatternError(message: String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)))
        }
        // What keeps a purge bounded in time: without back-references the
        // engine matches a key in time polynomial in its length and the
        // pattern's (both bounded); with one, exponential.
        guard !hasBackReference(source) else {
            return .failure(PatternError(message: "back-references (\\1 to \\9) are not accepted: matching them can take exponential time"))
        }
        return .success(pattern)
    }

    /// Whether an extended expression holds a back-reference: `\1` to `\9`
    /// outside a bracket expression (where a backslash is itself).
    static func hasBackReference(_ source: String) -> Bool {
        let b = Array(source.utf8)
        var i = 0
        while i < b.count {
            if b[i] == UInt8(ascii: "\\") {
                if i + 1 < b.count, (0x31...0x39).contains(b[i + 1]) { return true }
                i += 2
            } else if b[i] == UInt8(ascii: "[") {
                i += 1
                if i < b.count, b[i] == UInt8(ascii: "^") { i += 1 }
                if i < b.count, b[i] == UInt8(ascii: "]") { i += 1 }  // a leading ] is a member
                while i < b.count, b[i] != UInt8(ascii: "]") {
                    // [:alpha:], [.x.], [=x=] end with a ] of their own.
                    if b[i] == UInt8(ascii: "["), i + 1 < b.count, b[i + 1] == 0x3A || b[i + 1] == 0x2E || b[i + 1] == 0x3D {
                        let close = b[i + 1]
                        i += 2
                        while i + 1 < b.count, !(b[i] == close && b[i + 1] == UInt8(ascii: "]")) { i += 1 }
                        i += 2
                    } else {
                        i += 1
                    }
                }
                i += 1
            } else {
                i += 1
            }
        }
        return false
    }

    public struct PatternError: Error, Equatable { public let message: String }

    private var isCompiled = true

    private init(source: String) { self.source = source }

    deinit { if isCompiled { regfree(&compiled) } }

    /// Whether a stored key's target matches.
    public func matches(key: String) -> Bool {
        var target = Substring(key)
        if let end = key.utf8.firstIndex(where: { $0 == 0x20 || $0 == 0x0A }) { target = key[..<end] }
        return String(target).withCString { regexec(&compiled, $0, 0, nil, 0) == 0 }
    }

    /// The literal start every match must have, when the pattern is
    /// anchored (`^/api/v1/...`): the fleet's shared tier purges that
    /// prefix (a superset), or everything when there is none.
    public var literalPrefix: String {
        guard source.hasPrefix("^"), !source.contains("|") else { return "" }
        var prefix = ""
        var rest = source.dropFirst()
        while let c = rest.first {
            if "\\.[]()*+?{}|^$".contains(c) {
                // A quantifier makes the character before it optional.
                if "*?{".contains(c), !prefix.isEmpty { prefix.removeLast() }
                break
            }
            prefix.append(c)
            rest = rest.dropFirst()
        }
        return prefix
    }

    public static func == (a: PurgePattern, b: PurgePattern) -> Bool { a.source == b.source }
    public var description: String { source }
}
