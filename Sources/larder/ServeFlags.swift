import ArgumentParser
import Configuration

/// What `serve`'s flags say, as plain values: the
/// config file, and the values of the flags that set a config key. Made by
/// ArgumentParser (`ServeOptions.flags`), or, for the daemon's usual
/// command lines, read directly (`init?(plain:)`).
struct ServeFlags: Equatable {
    /// Each flag that sets a config key, with its key (applied in this
    /// order, after the file).
    static let keyed: [(flag: String, key: ConfigKey)] = [
        ("--listen", .listen), ("--upstream", .upstream), ("--memory-limit", .memory_limit), ("--log-level", .log_level),
        ("--cache-dir", .cache_dir), ("--disk-limit", .disk_limit), ("--workers", .workers),
        ("--admin-listen", .admin_listen), ("--admin-token-file", .admin_token_file),
    ]

    var config: String?
    /// The value given for each of `keyed`, by its index there.
    private(set) var values = [String?](repeating: nil, count: ServeFlags.keyed.count)

    init(config: String?, values: [ConfigKey: String]) {
        self.config = config
        for (i, entry) in Self.keyed.enumerated() { self.values[i] = values[entry.key] }
    }

    /// `--name value` and `--name=value` pairs of the flags above, each at
    /// most once, each value one ArgumentParser would take too; nil for
    /// anything else (help, `--version`, a mistake, a repeat), which goes
    /// through ArgumentParser for its usual answer. ArgumentParser's first
    /// parse of `serve` costs more than half of what runs before the
    /// listener opens (its reflection over the options; bench/RESULTS.md),
    /// and systemd starts the daemon with `serve --config FILE`.
    init?(plain arguments: ArraySlice<String>) {
        var rest = arguments
        while let argument = rest.popFirst() {
            let name: Substring, value: String
            if let equals = argument.firstIndex(of: "=") {
                name = argument[..<equals]
                value = String(argument[argument.index(after: equals)...])
            } else {
                guard let next = rest.popFirst(), !next.hasPrefix("-") else { return nil }
                (name, value) = (argument[...], next)
            }
            guard !value.isEmpty else { return nil }
            if name == "--config" {
                guard config == nil else { return nil }
                config = value
                continue
            }
            guard let i = Self.keyed.firstIndex(where: { $0.flag == name }), values[i] == nil,
                  Self.keyed[i].key != .workers || Int(value) != nil else { return nil }
            values[i] = value
        }
    }

    /// The config file in use: --config, else the default one (`DefaultConfig`).
    var configPath: String? { config ?? DefaultConfig.path }

    var upstream: String? { value(.upstream) }
    var adminTokenFile: String? { value(.admin_token_file) }

    func value(_ key: ConfigKey) -> String? {
        Self.keyed.firstIndex { $0.key == key }.flatMap { values[$0] }
    }

    /// Defaults, then the config file, then flags; exits 78 on a bad file.
    func resolve() throws -> Settings {
        do {
            return try settings()
        } catch let error as ConfigError {
            complain("\(error)")
            throw Exit.config
        }
    }

    /// Defaults, then the config file, then flags. Throws `ConfigError` for
    /// the file and `ValidationError` for a flag.
    func settings() throws -> Settings {
        var settings = Settings()
        if let configPath { try ConfigFile.load(configPath, into: &settings) }
        for (i, entry) in Self.keyed.enumerated() {
            guard let value = values[i] else { continue }
            let raw: RawValue = entry.key == .workers ? .integer(Int(value)!) : .string(value)
            if let problem = settings.apply(entry.key, raw) {
                throw ValidationError("\(entry.flag) \(value): \(problem)")
            }
        }
        if let upstream, let problem = settings.unknownPool(), problem.route == nil {
            throw ValidationError("--upstream \(upstream): \(problem.message)")
        }
        return settings
    }
}
