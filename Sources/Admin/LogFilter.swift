import Telemetry

/// What a follower of the log asked for (`GET /log?follow=1&status=5xx&
/// result=miss&prefix=/v1/&slower-than=100ms`): every condition given must hold.
public struct LogFilter: Equatable, Sendable {
    /// A status class (5 for 5xx) or one status.
    public var statusClass: Int?
    public var status: Int?
    public var result: LatencyHistograms.Result?
    public var prefix: String? {
        didSet { prefixBytes = prefix.map { Array($0.utf8) } ?? [] }
    }
    private var prefixBytes: [UInt8] = []
    /// Answers that took longer than this (microseconds, to the last byte).
    public var slowerThanMicroseconds: Int?

    public init() {}

    /// The filter of a query, or the message of a 400.
    static func parse(_ query: [(name: String, value: String)]) -> Result<LogFilter, LogFilterError> {
        var filter = LogFilter()
        for (name, value) in query {
            switch name {
            case "follow": continue
            case "status":
                let v = value.lowercased()
                if v.count == 3, v.hasSuffix("xx"), let digit = Int(v.prefix(1)), (1...5).contains(digit) {
                    filter.statusClass = digit
                } else if let n = Int(v), (100...999).contains(n) {
                    filter.status = n
                } else {
                    return .failure(LogFilterError(message: "status: expected a status such as 404 or a class such as 5xx"))
                }
            case "result":
                guard let result = LatencyHistograms.Result(label: value) else {
                    return .failure(LogFilterError(message: "result: expected hit, miss, pass or other"))
                }
                filter.result = result
            case "prefix":
                guard value.hasPrefix("/") else { return .failure(LogFilterError(message: "prefix: expected a path such as /v1/")) }
                filter.prefix = value
            case "slower-than":
                guard let micros = Self.microseconds(value) else {
                    return .failure(LogFilterError(message: "slower-than: expected a duration such as 100ms or 2s"))
                }
                filter.slowerThanMicroseconds = micros
            default:
                return .failure(LogFilterError(message: "unknown parameter \(name) (known: follow, status, result, prefix, slower-than)"))
            }
        }
        return .success(filter)
    }

    public func admits(_ line: AccessLine) -> Bool {
        let figures = line.figures
        if let statusClass, figures.status / 100 != statusClass { return false }
        if let status, figures.status != status { return false }
        if let result, figures.result != result { return false }
        if prefix != nil, !line.target.starts(with: prefixBytes) { return false }
        if let slowerThanMicroseconds, (figures.totalMicroseconds ?? 0) <= slowerThanMicroseconds { return false }
        return true
    }

    /// "250ms", "2s", "1.5s" as microseconds.
    static func microseconds(_ text: String) -> Int? {
        let (number, scale): (Substring, Double) = text.hasSuffix("ms") ? (text.dropLast(2), 1_000)
            : text.hasSuffix("s") ? (text.dropLast(1), 1_000_000) : (Substring(text), 1_000)
        guard let value = Double(number), value >= 0, value < 3_600_000 else { return nil }
        return Int(value * scale)
    }
}

public struct LogFilterError: Error, Equatable {
    public let message: String
}
