/// One worker's answers counted by status class (1xx to 5xx) and by how
/// they were answered (`LatencyHistograms.Result`): what `/metrics` shows
/// as `larder_responses_total{code, result}`, and what "errors" means in
/// `larder top` and on the status page (answers with a 5xx). Only its
/// worker's thread writes; read by any.
public final class ResponseCounts: @unchecked Sendable {
    /// The classes counted: 1xx ... 5xx (anything else counts as 5xx).
    public static let classes = ["1xx", "2xx", "3xx", "4xx", "5xx"]
    private static let results = LatencyHistograms.Result.allCases.count
    private let cells = CounterCells(count: ResponseCounts.classes.count * ResponseCounts.results)

    public init() {}

    deinit { cells.free() }

    /// Index of a status's class: 0 for 1xx ... 4 for 5xx (and anything odd).
    @inline(__always)
    public static func classIndex(_ status: Int) -> Int {
        let index = status / 100 - 1
        return index >= 0 && index < 4 ? index : 4
    }

    /// Counts one answer; on the owning worker's thread only.
    @inline(__always)
    public func record(status: Int, result: LatencyHistograms.Result) {
        cells.add(Self.classIndex(status) * Self.results + result.rawValue, 1)
    }

    /// Answers of status class `classIndex` (0: 1xx) answered as `result`.
    public func value(classIndex: Int, result: LatencyHistograms.Result) -> Int {
        cells.value(classIndex * Self.results + result.rawValue)
    }
}
