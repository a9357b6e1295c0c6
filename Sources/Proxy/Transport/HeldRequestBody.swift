import HTTP1
import HTTPHeaders
import Telemetry
import Upstream

/// A request body on its way upstream. One small enough (request_buffer_size)
/// is held until complete, so a slow upload holds no upstream connection and
/// upstream_timeout starts when the upstream can have the whole request;
/// one that outgrows the limit streams from then on, as larger ones do.
/// A share of the bytes that every worker's held request bodies may take
/// together (request_buffer_total): 2,000 connections each holding a body
/// just under 1 MiB took 2 GB. Given back when the body goes upstream, or
/// when this goes.
final class HeldBodyReservation {
    private let stats: ProxyStats
    private let limit: Int
    private(set) var bytes = 0

    init(stats: ProxyStats, limit: Int) {
        self.stats = stats
        self.limit = limit
    }

    deinit { releaseAll() }

    /// Takes `n` bytes more of the total; false, taking nothing, beyond it.
    func take(_ n: Int) -> Bool {
        var current = stats.heldBodyBytes.load(ordering: .relaxed)
        while true {
            guard current + n <= limit else { return false }
            let (exchanged, original) = stats.heldBodyBytes.compareExchange(expected: current, desired: current + n,
                                                                            ordering: .relaxed)
            if exchanged {
                bytes += n
                return true
            }
            current = original
        }
    }

    func releaseAll() {
        guard bytes > 0 else { return }
        stats.heldBodyBytes.subtract(bytes, ordering: .relaxed)
        bytes = 0
    }
}

struct HeldRequestBody {
    private enum Phase {
        /// Not gone upstream yet; `hold`: small enough to hold.
        case before(hold: Bool)
        /// Held until complete, with the upstream request's fields.
        case holding([UInt8], fields: HeaderFields)
        /// Streamed to the transfer (or there is none).
        case passed
    }

    private let limit: Int
    private let framing: BodyFraming
    private var phase: Phase
    private(set) var isComplete = false
    /// Its share of the total held (nil: no total, as in tests of this alone).
    private let reservation: HeldBodyReservation?
    /// Small enough to hold, but streamed: the total was reached.
    private(set) var streamedForTotal = false

    init(framing: BodyFraming, limit: Int, reservation: HeldBodyReservation? = nil) {
        self.limit = limit
        self.framing = framing
        self.reservation = reservation
        switch framing {
        case .none: phase = .before(hold: false)
        case .contentLength(let n):
            let small = limit > 0 && n <= limit
            let reserved = small && (reservation?.take(n) ?? true)
            streamedForTotal = small && !reserved
            phase = .before(hold: reserved)
        case .chunked: phase = .before(hold: limit > 0)  // until it outgrows the limit (or the total)
        }
    }

    enum Forward: Equatable {
        /// Held until complete: the transfer starts at `end` (or sooner,
        /// when the body outgrows the limit).
        case wait
        case start(UpstreamRequest.Body)
    }

    /// The request is ready to go upstream with `fields`.
    mutating func forward(fields: HeaderFields) -> Forward {
        switch phase {
        case .before(hold: true) where !isComplete:
            var held: [UInt8] = []
            if case .contentLength(let n) = framing { held.reserveCapacity(n) }
            phase = .holding(held, fields: fields)
            return .wait
        case .holding(let held, _):
            return isComplete ? .start(.streamed(length: held.count)) : .wait
        case .before, .passed:
            switch framing {
            case .none: return .start(.none)
            case .contentLength(let n): return .start(.streamed(length: n))
            case .chunked: return .start(.streamed(length: nil))
            }
        }
    }

    /// The transfer started: the bytes held to supply first (nil when
    /// none were), and whether the body is complete with them.
    mutating func transferStarted() -> (held: [UInt8], complete: Bool)? {
        defer {
            phase = .passed
            reservation?.releaseAll()
        }
        guard case .holding(let held, _) = phase else { return nil }
        return (held, isComplete)
    }

    enum Piece: Equatable {
        /// Kept here.
        case held
        /// For the transfer (if there is one).
        case supply
        /// The body outgrew the limit: start the transfer now, streaming
        /// it, with these fields (then `transferStarted`).
        case startStreaming(HeaderFields)
    }

    /// A piece of the body arrived from the client.
    mutating func append(_ bytes: UnsafeRawBufferPointer) -> Piece {
        guard case .holding(var held, let fields) = phase else { return .supply }
        // The total reached (what is held goes with what follows), or not.
        let overTotal = framing == .chunked && !(reservation?.take(bytes.count) ?? true)
        if overTotal { streamedForTotal = true }
        phase = .passed  // the array is uniquely referenced while appended to
        held.append(contentsOf: bytes)
        phase = .holding(held, fields: fields)
        return overTotal || held.count > limit ? .startStreaming(fields) : .held
    }

    /// The body is complete: true when the request, held until now, should
    /// go upstream.
    mutating func end() -> Bool {
        isComplete = true
        if case .holding = phase { return true }
        return false
    }
}
