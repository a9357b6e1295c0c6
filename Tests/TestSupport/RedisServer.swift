import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Debian's redis-server, started for one test on an ephemeral loopback
/// port (and a unix socket), stopped by PID at teardown.
public final class RedisServer {
    public let port: Int
    public let socketPath: String
    public let directory: String
    /// With `tls`: the port that speaks TLS (the plain one stays too).
    public let tlsPort: Int?
    private let process: Process

    public static var binary: String? {
        ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// `tls`: a certificate and key to serve TLS with, on `tlsPort`.
    public init(extra: [String] = [], port: Int? = nil, directory: String? = nil, tls: (cert: String, key: String)? = nil) throws {
        guard let binary = Self.binary else {
            throw RedisTestError("redis-server is not installed: run .ci/install-deps --test (the README's test command does)")
        }
        self.port = port ?? unusedPort()
        self.directory = directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("larder-redis-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
        socketPath = self.directory + "/redis.sock"
        let tlsPort = tls.map { _ in unusedPort() }
        self.tlsPort = tlsPort
        var tlsArguments: [String] = []
        if let tls, let tlsPort {
            tlsArguments = ["--tls-port", String(tlsPort), "--tls-cert-file", tls.cert, "--tls-key-file", tls.key,
                            "--tls-ca-cert-file", tls.cert, "--tls-auth-clients", "no"]
        }
        process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--port", String(self.port), "--bind", "127.0.0.1", "--unixsocket", socketPath, "--dir", self.directory,
                             "--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", self.directory + "/redis.log"] + tlsArguments + extra
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Ready when its socket file exists and the port accepts (bounded).
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if FileManager.default.fileExists(atPath: socketPath), canConnect(port: self.port) { return }
            guard process.isRunning else { break }
            usleep(10_000)
        }
        stop()
        throw RedisTestError("redis-server did not start: \((try? String(contentsOfFile: self.directory + "/redis.log", encoding: .utf8)) ?? "")")
    }

    /// Stops it (SIGKILL: the test is about a server that vanishes) and waits.
    public func stop() { killAndWait(process) }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A self-signed certificate (its own authority) for `names` (such as
/// "IP:127.0.0.1,DNS:localhost"), made by the openssl command in `directory`.
public func selfSignedCertificate(in directory: String, names: String) throws -> (cert: String, key: String) {
    let (cert, key) = (directory + "/cert.pem", directory + "/cert.key")
    let openssl = Process()
    openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    openssl.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                         "-out", cert, "-days", "2", "-subj", "/CN=redis test", "-addext", "subjectAltName=" + names]
    openssl.standardError = FileHandle.nullDevice
    try openssl.run()
    openssl.waitUntilExit()
    guard openssl.terminationStatus == 0 else { throw RedisTestError("openssl req failed") }
    return (cert, key)
}

/// SIGKILL, then waits (bounded: 10 s) until the process is gone.
func killAndWait(_ process: Process) {
    guard process.isRunning else { return }
    kill(process.processIdentifier, SIGKILL)
    let deadline = Date().addingTimeInterval(10)
    while process.isRunning && Date() < deadline { usleep(5_000) }
}

public struct RedisTestError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
