import Foundation
import TOMLKit

/// Reads a TOML config file into `Settings`. Unknown keys and wrong types
/// are errors naming the file, line and key.
enum ConfigFile {
    static func load(_ path: String, into settings: inout Settings) throws(ConfigError) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigError(file: path, line: nil, key: nil, message: "cannot read the file (\(error.localizedDescription))")
        }
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigError(file: path, line: error.source.begin.line, key: nil, message: "invalid TOML: \(error.description)")
        } catch {
            throw ConfigError(file: path, line: nil, key: nil, message: "invalid TOML: \(error)")
        }
        let lines = keyLines(text)
        for key in table.keys.sorted(by: { (lines[$0] ?? 0) < (lines[$1] ?? 0) }) {
            guard let value = table[key] else { continue }
            guard let known = ConfigKey(rawValue: key) else {
                throw ConfigError(file: path, line: lines[key], key: key,
                                  message: "unknown key (known keys: \(ConfigKey.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            let raw: RawValue
            switch value.type {
            case .string: raw = .string(value.string!)
            case .int: raw = .integer(value.int!)
            case .bool: raw = .bool(value.bool!)
            default:
                throw ConfigError(file: path, line: lines[key], key: key, message: "wrong type \(value.type), \(expectation(known))")
            }
            if case .integer = raw, known.kind != .integer {
                if known.kind != .size {
                    throw ConfigError(file: path, line: lines[key], key: key, message: "wrong type integer, \(expectation(known))")
                }
            }
            if case .bool = raw, known.kind != .bool {
                throw ConfigError(file: path, line: lines[key], key: key, message: "wrong type boolean, \(expectation(known))")
            }
            if case .string = raw, known.kind == .bool {
                throw ConfigError(file: path, line: lines[key], key: key, message: "wrong type string, \(expectation(known))")
            }
            if let problem = settings.apply(known, raw) {
                throw ConfigError(file: path, line: lines[key], key: key, message: problem)
            }
        }
    }

    private static func expectation(_ key: ConfigKey) -> String {
        switch key.kind {
        case .string: return "expected a string"
        case .size: return "expected a size string such as \"256MiB\" (or an integer of bytes)"
        case .duration: return "expected a duration string such as \"30s\""
        case .integer: return "expected an integer"
        case .bool: return "expected true or false"
        case .lifetime: return "expected a duration string such as \"1h\" or a preset"
        }
    }

    /// Line numbers of top-level `key = value` lines. TOMLKit does not report
    /// positions of keys, so they are found by a light scan of the text.
    static func keyLines(_ text: String) -> [String: Int] {
        var result: [String: Int] = [:]
        var inTopLevel = true
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingCharacters()
            if line.hasPrefix("[") { inTopLevel = false; continue }
            guard inTopLevel, !line.hasPrefix("#"), let eq = line.firstIndex(of: "=") else { continue }
            var key = line[..<eq].trimmingCharacters()
            if key.count >= 2, key.first == "\"" || key.first == "'", key.last == key.first {
                key = String(key.dropFirst().dropLast())
            }
            if result[key] == nil { result[key] = index + 1 }
        }
        return result
    }
}
