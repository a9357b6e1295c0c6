/// One answered request as the status page and `larder top` count it.
public struct RequestSample: Sendable {
    public var time: Int64
    public var method: String
    public var target: String
    public var status: Int
    public var result: LatencyHistograms.Result
    /// How many requests it stands for: `RequestSamples.hitStride` for a
    /// sampled hit, 1 for everything else.
    public var weight: Int
    /// The Cache-Status detail, for errors only (nil otherwise).
    public var cache: String?

    public init(time: Int64, method: String, target: String, status: Int, result: LatencyHistograms.Result,
                weight: Int, cache: String? = nil) {
        (self.time, self.method, self.target, self.status, self.result, self.weight, self.cache)
            = (time, method, target, status, result, weight, cache)
    }

    public var isError: Bool { status >= 500 }
}

/// Which requests the admin thread sees, for the top URLs and the recent
/// errors: every miss, pass and error (each already costs far more than
/// queuing it), and one hit in `hitStride` standing for all of them, so a
/// hit pays a decrement and a branch. Each worker pushes to a bounded queue
/// of its own (`WorkerQueue`) that the admin thread drains every second.
public final class RequestSamples: Sendable {
    /// One hit queued in this many (its weight).
    public static let hitStride = 32
    /// Samples one worker holds between two drains at most; more are dropped and counted.
    public static let capacity = 16_384
    private let queues = WorkerQueues<RequestSample>(capacity: RequestSamples.capacity)

    public init() {}

    /// A worker's queue.
    public func makeQueue() -> WorkerQueue<RequestSample> { queues.make() }

    /// What every worker queued since the last call, and how many samples they dropped.
    public func drain() -> (samples: [RequestSample], dropped: Int) {
        let (items, dropped) = queues.drain()
        return (items, dropped)
    }
}

/// A worker's side: decides per answer whether it is queued.
public struct RequestSampler {
    private var queue: WorkerQueue<RequestSample>?
    private var hitsToSkip = RequestSamples.hitStride - 1

    public init(_ queue: WorkerQueue<RequestSample>?) { self.queue = queue }

    /// Whether `result` with `status` goes to the queue now, and with what
    /// weight (a hit is queued once in `hitStride`).
    @inline(__always)
    public mutating func weight(_ result: LatencyHistograms.Result, status: Int) -> Int? {
        guard queue != nil else { return nil }
        guard result == .hit, status < 500 else { return 1 }
        if hitsToSkip > 0 {
            hitsToSkip -= 1
            return nil
        }
        hitsToSkip = RequestSamples.hitStride - 1
        return RequestSamples.hitStride
    }

    public func push(_ sample: RequestSample) { queue?.push(sample) }
}
