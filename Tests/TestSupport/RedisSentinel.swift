import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One real Redis Sentinel (Debian's `redis-sentinel`, else `redis-server
/// --sentinel`) on an ephemeral loopback port, monitoring one master with
/// short timeouts, so that a failover takes seconds. Stopped by PID.
public final class RedisSentinel {
    public let port: Int
    public let directory: String
    private let process: Process

    /// `quorum`: sentinels that must agree the master is down; `password`:
    /// the sentinel's own (and the others'); `masterPassword`: Redis's.
    public init(monitoring master: String, at masterPort: Int, quorum: Int = 2, password: String? = nil,
                masterPassword: String? = nil) throws {
        let sentinel = "/usr/bin/redis-sentinel"
        let useSentinel = FileManager.default.isExecutableFile(atPath: sentinel)
        guard let binary = useSentinel ? sentinel : RedisServer.binary else {
            throw RedisTestError("redis-sentinel is not installed: run .ci/install-deps --test (the README's test command does)")
        }
        port = unusedPort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-sentinel-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // A sentinel rewrites its configuration file as it learns: it must be its own, writable.
        let config = """
            port \(port)
            bind 127.0.0.1
            daemonize no
            dir \(directory)
            logfile \(directory)/sentinel.log
            \(password.map { "requirepass \($0)\nsentinel sentinel-pass \($0)" } ?? "")
            sentinel monitor \(master) 127.0.0.1 \(masterPort) \(quorum)
            \(masterPassword.map { "sentinel auth-pass \(master) \($0)" } ?? "")
            sentinel down-after-milliseconds \(master) 1000
            sentinel failover-timeout \(master) 5000
            sentinel parallel-syncs \(master) 1

            """
        let file = directory + "/sentinel.conf"
        try config.write(toFile: file, atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = useSentinel ? [file] : [file, "--sentinel"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if canConnect(port: port) { return }
            guard process.isRunning else { break }
            usleep(10_000)
        }
        stop()
        throw RedisTestError("redis-sentinel did not start: \((try? String(contentsOfFile: directory + "/sentinel.log", encoding: .utf8)) ?? "")")
    }

    public var log: String { (try? String(contentsOfFile: directory + "/sentinel.log", encoding: .utf8)) ?? "" }

    /// Stops it (SIGKILL) and waits, bounded.
    public func stop() { killAndWait(process) }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
