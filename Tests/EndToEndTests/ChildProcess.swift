import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A child process whose output is collected, stopped by PID on teardown.
final class ChildProcess {
    let process = Process()
    private let out = Pipe(), err = Pipe()
    private var pipesClosed = false
    private let lock = NSCondition()
    private var stdoutText = ""
    private var stderrText = ""

    /// Its standard input, when asked for (`send`); else /dev/null.
    private var input: Pipe?

    /// `environment`: variables added to (or replacing) the test's own.
    /// `withInput`: its standard input is a pipe `send` writes to.
    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:], withInput: Bool = false) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        process.standardOutput = out
        process.standardError = err
        if withInput {
            let pipe = Pipe()
            input = pipe
            process.standardInput = pipe
        } else {
            process.standardInput = FileHandle.nullDevice
        }
        try process.run()
        // Our own reader threads, not FileHandle.readabilityHandler: clearing
        // a handler cancels its dispatch source asynchronously, and closing
        // the descriptor before libdispatch has let go of it crashed its
        // event loop thread (a suite run on a fresh clone died of SIGSEGV).
        readers = [(out, false), (err, true)].map { pipe, isStderr in
            PipeReader(pipe.fileHandleForReading.fileDescriptor) { [weak self] data in self?.append(data, stderr: isStderr) }
        }
    }

    private var readers: [PipeReader] = []

    private func append(_ data: Data, stderr: Bool) {
        guard !data.isEmpty else { return }
        lock.lock()
        if stderr { stderrText += String(decoding: data, as: UTF8.self) } else { stdoutText += String(decoding: data, as: UTF8.self) }
        lock.broadcast()
        lock.unlock()
    }

    /// Writes to its standard input (started `withInput`).
    func send(_ text: String) {
        input?.fileHandleForWriting.write(Data(text.utf8))
    }

    var stderr: String { lock.lock(); defer { lock.unlock() }; return stderrText }
    var stdout: String { lock.lock(); defer { lock.unlock() }; return stdoutText }

    /// Waits (bounded) until `pattern` matches stdout or stderr; returns capture group 1.
    func waitFor(_ pattern: String, timeout: TimeInterval = 15) -> String? {
        let regex = try! NSRegularExpression(pattern: pattern)
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while true {
            for text in [stdoutText, stderrText] {
                let range = NSRange(text.startIndex..., in: text)
                if let m = regex.firstMatch(in: text, range: range) {
                    let r = m.numberOfRanges > 1 ? m.range(at: 1) : m.range
                    return Range(r, in: text).map { String(text[$0]) }
                }
            }
            // After exit, no more can come once both pipes are at end of file.
            if !process.isRunning && readers.allSatisfy(\.isFinished) { return nil }
            if Date() >= deadline { return nil }
            _ = lock.wait(until: min(deadline, Date().addingTimeInterval(0.1)))
        }
    }

    /// Waits for exit (bounded); returns the exit status or nil on timeout.
    func waitForExit(timeout: TimeInterval = 15) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        return process.isRunning ? nil : process.terminationStatus
    }

    /// Waits (bounded) until everything the exited child wrote has been
    /// read: both pipes at end of file. Call after `waitForExit`.
    func drainOutput(timeout: TimeInterval = 5) {
        guard !process.isRunning else { return }
        let deadline = Date().addingTimeInterval(timeout)
        for reader in readers { _ = reader.waitUntilStopped(timeout: max(0, deadline.timeIntervalSinceNow)) }
    }

    /// SIGTERM, then SIGKILL if it does not exit in time; then the rest of
    /// its output is collected and the pipes closed.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            if waitForExit(timeout: 12) == nil {
                kill(process.processIdentifier, SIGKILL)
                _ = waitForExit(timeout: 5)
            }
        }
        closePipes()
    }

    /// XCTest keeps every test case (and so this object) until the run
    /// ends: without this each stopped child would leave its pipes open, a
    /// thousand descriptors by the end of the suite. The readers deliver
    /// what is left and stop (a grandchild may still hold the write end);
    /// a pipe is closed only once its reader has stopped.
    private func closePipes() {
        guard !process.isRunning else { return }
        lock.lock()
        if pipesClosed { lock.unlock(); return }
        pipesClosed = true
        lock.unlock()
        for reader in readers { reader.stop() }
        for (reader, pipe) in zip(readers, [out, err]) where reader.waitUntilStopped(timeout: 5) {
            try? pipe.fileHandleForReading.close()
        }
    }
}

/// Reads a pipe on a thread of its own until end of file or `stop()`
/// (then once nothing more is waiting), handing each piece to `deliver`.
final class PipeReader: @unchecked Sendable {
    private let state = NSCondition()
    private var stopping = false
    private var finished = false

    init(_ fd: Int32, deliver: @escaping (Data) -> Void) {
        let thread = Thread { [self] in
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let n = poll(&ready, 1, 100)
                if n < 0 && errno == EINTR { continue }
                if n == 0 {
                    if isStopping { break }
                    continue
                }
                let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }  // end of file (or an error)
                deliver(Data(chunk[0..<count]))
            }
            state.lock(); finished = true; state.broadcast(); state.unlock()
        }
        thread.name = "child-output"
        thread.start()
    }

    private var isStopping: Bool { state.lock(); defer { state.unlock() }; return stopping }

    var isFinished: Bool { state.lock(); defer { state.unlock() }; return finished }

    func stop() { state.lock(); stopping = true; state.unlock() }

    /// Whether the thread has finished (it no longer touches the descriptor):
    /// end of file was read, or `stop()` was called and nothing more came.
    func waitUntilStopped(timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        state.lock()
        defer { state.unlock() }
        while !finished && state.wait(until: deadline) {}
        return finished
    }
}
