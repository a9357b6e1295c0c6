import AdminClient
import ArgumentParser
import CCurl
import Configuration
import FoundationEssentials
import Upstream

/// The token in an admin token file (its first line, trimmed); exits with
/// a clear message when the file cannot be read or is empty.
func readAdminToken(_ path: String) throws -> String {
    guard let data = FileManager.default.contents(atPath: path) else {
        complain("cannot read the admin token file \(path); check the path and its permissions")
        throw Exit.failure
    }
    let token = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first
        .map { $0.trimmingCharacters() } ?? ""
    guard !token.isEmpty else {
        complain("the admin token file \(path) is empty; put the token on its first line")
        throw Exit.config
    }
    return token
}

/// Where the admin API is and how to authenticate: shared by the commands
/// that talk to it. Flags first, then the config file's `admin_listen` and
/// admin token (the file `serve` runs with), then the defaults.
struct AdminOptions: ParsableArguments {
    @Option(help: "Admin API base URL (default: admin_listen of the config file, else http://127.0.0.1:8081).")
    var admin: String?

    @Option(name: .customLong("admin-token-file"), help: "File holding the admin token (also: LARDER_ADMIN_TOKEN).")
    var adminTokenFile: String?

    @Option(help: "Config file to take the admin address and token from (default: $LARDER_CONFIG, else /etc/larder/larder.toml if it exists).")
    var config: String?

    /// The config file's settings, when there is one; exits 78 when it is bad.
    private func configured() throws -> Settings? {
        guard let path = config ?? DefaultConfig.path else { return nil }
        var settings = Settings()
        do {
            try ConfigFile.load(path, into: &settings)
        } catch {
            complain("\(error)")
            throw Exit.config
        }
        return settings
    }

    func token() throws -> String? {
        if let adminTokenFile { return try readAdminToken(adminTokenFile) }
        if let env = environmentValue("LARDER_ADMIN_TOKEN"), !env.isEmpty { return env }
        guard let settings = try configured() else { return nil }
        // The read token serves the commands that only read (a purge with it is refused).
        return try Serve.adminToken(settings, flagFile: nil) ?? Serve.adminReadToken(settings)
    }

    /// The admin API's base URL, as given or as the config file says.
    var address: String {
        get throws {
            if let admin { return admin }
            guard let settings = try configured() else { return "http://127.0.0.1:8081" }
            guard let host = settings.adminHost else {
                complain("the admin API is off in \(config ?? DefaultConfig.path ?? "the config file") (admin_listen = none); pass --admin")
                throw Exit.usage
            }
            // A wildcard address is reached on loopback.
            let reachable = host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : host
            return "http://" + (reachable.contains(":") ? "[\(reachable)]" : reachable) + ":\(settings.adminPort)"
        }
    }

    /// The base URL without a trailing slash; exits 64 when it is not an http(s) URL.
    func baseURL() throws -> String {
        let admin = try address
        guard admin.hasPrefix("http://") || admin.hasPrefix("https://") else {
            complain("--admin \(admin): expected http://HOST:PORT")
            throw Exit.usage
        }
        return admin.hasSuffix("/") ? String(admin.dropLast()) : admin
    }

    /// Sends one request; exits 69 when the admin API cannot be reached and
    /// 77 when it refuses the token.
    func send(method: String, pathAndQuery: String) throws -> (status: Int, body: String) {
        let admin = try baseURL()
        let result = AdminHTTP.perform(method: method, url: admin + pathAndQuery, token: try token())
        switch result {
        case .failure(let message):
            complain("cannot reach the admin API at \(admin): \(message); is larder running, and is --admin right?")
            throw Exit.unavailable
        case .success(let status, let body):
            if status == 401 || status == 403 {
                complain("the admin API at \(admin) refused the token (\(status)); pass --admin-token-file or set LARDER_ADMIN_TOKEN")
                throw Exit.noPermission
            }
            return (status, body)
        }
    }
}

struct Purge: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Remove stored responses through the admin API.",
        discussion: """
            Give one of: a URL or path (every stored variant of it), --prefix PATH, \
            --tag TAG, --regex RE (a POSIX extended regular expression on each stored \
            path and query), or --all. With --soft the matches are marked stale (revalidated \
            before reuse) instead of removed.
            """
    )

    @Argument(help: "A path such as /products/1 or a full URL.")
    var url: String?

    @Option(help: "Purge every URL under this path prefix.")
    var prefix: String?

    @Option(help: "Purge every response carrying this tag (Surrogate-Key, Cache-Tag or a route's tags).")
    var tag: String?

    @Option(help: "Purge every URL whose path and query match this POSIX extended regular expression.")
    var regex: String?

    @Flag(help: "Purge everything.")
    var all = false

    @Flag(help: "Mark the matches stale instead of removing them.")
    var soft = false

    @OptionGroup var adminOptions: AdminOptions

    func validate() throws {
        let chosen = [url != nil, prefix != nil, tag != nil, regex != nil, all].filter { $0 }.count
        guard chosen == 1 else { throw ValidationError("give exactly one of URL, --prefix, --tag, --regex or --all") }
    }

    func run() throws {
        var query: String
        if let url { query = "url=" + Self.encode(url) }
        else if let prefix { query = "prefix=" + Self.encode(prefix) }
        else if let tag { query = "tag=" + Self.encode(tag) }
        else if let regex { query = "regex=" + Self.encode(regex) }
        else { query = "all=true" }
        if soft { query += "&soft=true" }
        let (status, body) = try adminOptions.send(method: "POST", pathAndQuery: "/purge?" + query)
        guard status == 200 else {
            complain("purge failed (\(status)): \(body.trimmingWhitespace())")
            throw Exit.failure
        }
        let count = Self.number("purged", in: body) ?? 0
        print("\(soft ? "marked stale" : "purged") \(count) stored response\(count == 1 ? "" : "s")")
        // In a fleet: which nodes applied it before the answer, or that it waits for Redis.
        guard let fleet = JSONValue.parse(body)?["fleet"] else { return }
        let nodes = fleet["nodes"]?.int ?? 0, acknowledged = fleet["acknowledged"]?.int ?? 0
        if fleet["queued"]?.bool == true {
            complain("the purge was applied here but only queued for the fleet: Redis is unreachable"
                     + (fleet["error"]?.string.map { " (\($0))" } ?? "")
                     + "; the other nodes get it once Redis is back")
            throw Exit.unavailable
        }
        print("fleet: applied by \(acknowledged) of \(nodes) node\(nodes == 1 ? "" : "s")"
              + (acknowledged < nodes ? " before the answer; the others apply it as they read the purge stream" : ""))
    }

    /// Percent-encodes everything but unreserved characters and '/'.
    static func encode(_ s: String) -> String { percentEncoded(s, keeping: "-._~/") }

    static func number(_ name: String, in json: String) -> Int? {
        JSONValue.parse(json)?[name]?.int
    }
}

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stats",
                                                    abstract: "Print the running proxy's statistics (JSON) from the admin API.")

    @OptionGroup var adminOptions: AdminOptions

    func run() throws {
        let (status, body) = try adminOptions.send(method: "GET", pathAndQuery: "/stats")
        guard status == 200 else {
            complain("stats failed (\(status)): \(body.trimmingWhitespace())")
            throw Exit.failure
        }
        print(body, terminator: body.hasSuffix("\n") ? "" : "\n")
    }
}
