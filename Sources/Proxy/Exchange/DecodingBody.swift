import CacheStorage
import Compression
import EventLoop
import Telemetry
import Threads

/// A stored gzip, zstd or br body decoded for one client as the client drains
/// (`ClientCoding`): compressed bytes are taken a piece at a time (in
/// place, or read into a buffer, as its `StoredBodyReader` has them), decoded into a small
/// buffer and handed on, and only the `wanted` bytes of the decoded
/// representation (all of it, or a range) are delivered. The driver asks
/// for at most a turn's worth at a time and none while its client is
/// behind, so no client holds a body decoded whole, and a large one never
/// makes other connections' hits wait. The decoded length must be the one
/// declared (sent as Content-Length): any other is a failure.
final class DecodingBody: BodySource {
    /// Decoded bytes per piece handed on.
    static let pieceBytes = 16 << 10
    /// Decoded bytes per loop turn, at most (then other connections' events).
    static let turnBytes = 16 << 10
    let pullBudget = DecodingBody.turnBytes
    /// Told why, when the body fails after its head went (the driver cuts the client).
    var failed: ((String) -> Void)?
    /// Where a file read that would wait for the disk is made instead
    /// (nil: read where asked), the counters that count it, and what to
    /// call on the loop when its bytes are in.
    var offload: (loop: EventLoop, counters: WorkerStats, ready: () -> Void)?
    /// A read is under way on an I/O thread: `fileBuffer` is its.
    private var reading = false
    /// That read failed.
    private var readFailed = false

    enum Step: Equatable {
        /// A turn's worth done, or the client is behind: more to come.
        case more
        /// The next compressed bytes are being read off the loop (not in
        /// the page cache): `ready` runs when they are in.
        case waiting
        /// Every wanted byte delivered (and, for the whole, the body ended as declared).
        case ended
        /// Corrupt, cut short, not the declared length, or a read failed.
        case failed(String)
    }

    /// The stored response (keeps a stored block's body alive).
    let entry: CachedResponse
    private let reader: StoredBodyReader
    private let decoder: any ContentDecoder
    private let compressedLength: Int
    private let length: Int
    private var wanted: Range<Int>
    /// Compressed bytes consumed.
    private var position = 0
    /// Read (a body not in memory), not yet consumed: `fileBuffer[fileFilled]`.
    private var fileBuffer: UnsafeMutableRawBufferPointer?
    private var fileFilled = 0..<0
    private let output = UnsafeMutableRawBufferPointer.allocate(byteCount: pieceBytes, alignment: 16)
    /// Decoded bytes so far.
    private(set) var produced = 0
    /// Decoded by `prime`, not yet delivered (at the start of `output`).
    private var held = 0
    /// `prime` was asked to read the page cache only (on a worker's loop),
    /// and stopped (`cold`) because the bytes were not there.
    private var primingCachedOnly = false
    private(set) var cold = false

    /// `reader`: the entry's stored body; `length`: the decoded size
    /// declared (`ClientCoding.declaredLength`); `wanted`: the bytes of it
    /// to deliver. Nil when its coding's library cannot start.
    init?(_ entry: CachedResponse, reader: StoredBodyReader, length: Int, wanted: Range<Int>) {
        guard let codec = Codec(rawValue: entry.coding.rawValue), let decoder = codec.decoder() else { return nil }
        self.reader = reader
        compressedLength = reader.count
        // A body not in memory is read into a buffer of its own.
        if reader.inPlace(from: 0) == nil { fileBuffer = .allocate(byteCount: Self.pieceBytes, alignment: 16) }
        // Held while the client drains: its own block, not a worker's period token.
        (self.entry, self.decoder, self.length, self.wanted) = (entry.owned(), decoder, length, wanted)
    }

    deinit {
        output.deallocate()
        fileBuffer?.deallocate()
    }

    /// Decodes the first piece and holds it (delivered by the first
    /// `pump`): false when the body fails at once (not gzip, say).
    func prime(cachedOnly: Bool = false) -> Bool {
        guard produced == 0 else { return true }
        primingCachedOnly = cachedOnly
        defer { primingCachedOnly = false }
        held = 0
        while produced == 0 && !decoder.finished {
            guard let input = nextInput() else { return false }
            guard let (consumed, made) = try? decoder.decode(input, into: output, isLast: position + input.count == compressedLength),
                  consumed > 0 || made > 0 else { return false }
            take(consumed)
            produced = made
        }
        held = produced
        return produced > 0 && produced <= length
    }

    /// Only these bytes of the decoded representation are delivered.
    func want(_ range: Range<Int>) { wanted = range }

    /// Decodes up to `budget` bytes, handing each piece of the wanted ones
    /// to `deliver`, which says whether to go on now (false: its client is
    /// behind; the driver calls again once it drained).
    func pump(budget: Int, deliver: (UnsafeRawBufferPointer) -> Bool) -> Step {
        if held > 0 {
            // The piece `prime` decoded, waiting in `output`.
            let to = min(held, wanted.upperBound)
            let goOn = wanted.lowerBound < to ? deliver(UnsafeRawBufferPointer(rebasing: output[wanted.lowerBound..<to])) : true
            held = 0
            if let end = finish() { return end }
            if !goOn { return .more }
        }
        var done = 0
        while done < budget {
            if reading { return .waiting }
            guard let input = nextInput() else { return .failed("its stored body could not be read") }
            if reading { return .waiting }
            let isLast = position + input.count == compressedLength
            let consumed: Int, made: Int
            do {
                (consumed, made) = try decoder.decode(input, into: output, isLast: isLast)
            } catch {
                return .failed("\(error)")
            }
            take(consumed)
            let start = produced
            produced += made
            done += made
            if produced > length { return .failed("it decodes to more than the \(length) bytes declared") }
            let from = max(start, wanted.lowerBound), to = min(produced, wanted.upperBound)
            let goOn = from < to ? deliver(UnsafeRawBufferPointer(rebasing: output[(from - start)..<(to - start)])) : true
            if let end = finish() { return end }
            if consumed == 0 && made == 0 { return .failed("the decoder made no progress") }
            if !goOn { return .more }
        }
        return .more
    }

    func pull(into sink: any ResponseSink, budget: Int) -> BodyPull {
        switch pump(budget: budget, deliver: { piece in
            sink.sendBody(copying: piece)
            return !sink.isBodyCongested
        }) {
        case .more: return .more
        case .waiting: return .waiting
        case .ended: return .ended
        case .failed(let reason):
            failed?(reason)
            return .cut(reason)
        }
    }

    func stop() {}

    /// The end, once every wanted byte went (a range needs no more) or the
    /// body ended; nil while more is to come.
    private func finish() -> Step? {
        if produced >= wanted.upperBound && wanted.upperBound < length { return .ended }
        guard decoder.finished else { return nil }
        return produced == length ? .ended : .failed("it decodes to \(produced) bytes, not the \(length) declared")
    }

    /// The compressed bytes not yet consumed that are at hand; nil when a read fails.
    private func nextInput() -> UnsafeRawBufferPointer? {
        if let inPlace = reader.inPlace(from: position) { return inPlace }
        guard let buffer = fileBuffer else { return nil }
        if fileFilled.isEmpty && position < compressedLength {
            guard !readFailed else { return nil }
            guard let offload else {
                // Not yet pulled (`prime`): from the page cache only when asked so, else `cold`.
                guard primingCachedOnly else {
                    guard let n = reader.read(from: position, into: buffer), n > 0 else { return nil }
                    fileFilled = 0..<n
                    return UnsafeRawBufferPointer(rebasing: buffer[fileFilled])
                }
                switch reader.readCached(from: position, into: buffer) {
                case .read(let n) where n > 0:
                    fileFilled = 0..<n
                    return UnsafeRawBufferPointer(rebasing: buffer[fileFilled])
                case .wouldBlock: cold = true; return nil
                default: return nil
                }
            }
            switch reader.readCached(from: position, into: buffer) {
            case .read(let n):
                fileFilled = 0..<n
            case .failed:
                return nil
            case .wouldBlock:
                // Read on an I/O thread into the buffer, which nothing here touches meanwhile
                // (`self` is held until the read is in).
                reading = true
                WorkerStats.bump(offload.counters.offloadedReads)
                let at = position
                BlockingWork.shared.run({ [self] in withExtendedLifetime(self) { reader.read(from: at, into: buffer) } }, on: offload.loop) { [self] n in
                    reading = false
                    if let n, n > 0 { fileFilled = 0..<n } else { readFailed = true }
                    self.offload?.ready()
                }
                return UnsafeRawBufferPointer(start: nil, count: 0)
            }
        }
        return UnsafeRawBufferPointer(rebasing: buffer[fileFilled])
    }

    private func take(_ consumed: Int) {
        position += consumed
        if fileBuffer != nil { fileFilled = (fileFilled.lowerBound + consumed)..<fileFilled.upperBound }
    }
}

/// The stored coded bodies found not decodable for clients that do not
/// take their coding (corrupt, not the length declared): such a client goes
/// upstream for an identity copy instead of being cut off at the same
/// byte. One per process, so every worker learns from the first failure;
/// bounded (forgotten when full). Asked only on the decoding path.
final class UndecodableBodies: Sendable {
    static let shared = UndecodableBodies()
    private let known = Locked(Set<String>())
    static let capacity = 1024

    /// The stored response it was: its key, when it arrived, its length.
    static func identity(_ entry: CachedResponse) -> String {
        "\(entry.key)\u{0}\(entry.timing.responseTime)\u{0}\(entry.bodyLength)"
    }

    func contains(_ entry: CachedResponse) -> Bool {
        let identity = Self.identity(entry)
        return known.withLock { $0.contains(identity) }
    }

    func insert(_ entry: CachedResponse) {
        let identity = Self.identity(entry)
        known.withLock {
            if $0.count >= Self.capacity { $0.removeAll(keepingCapacity: true) }
            $0.insert(identity)
        }
    }
}
