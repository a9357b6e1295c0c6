import EventLoop

/// The HTTP/1.1 connection's own small machine: where it stands (serving,
/// ending once its output is written, lingering, closed), what it is
/// waiting for (the client's reading, the disk, its end of input), and
/// the decisions taken from that and from what the connection holds
/// (`Held`): whether to read, to write, to take the next pipelined
/// request, to keep the connection after an answer, to linger before
/// closing. Pure: `ClientConnection` holds the socket and performs;
/// ConnectionFlowTests drive every order of events without one.
struct ConnectionFlow {
    enum Phase {
        case open, closingWhenFlushed, lingering, closed
    }

    /// What the connection holds when a decision is asked.
    struct Held {
        /// Bytes of answers queued and not yet written.
        var output = 0
        /// Bytes of input not parsed yet (pipelined requests).
        var unparsed = 0
        /// A request's body is still arriving.
        var body = false
        /// An exchange is answering.
        var exchange = false
        /// The upstream is behind with the request body: stop reading it.
        var uploadCongested = false
    }

    private(set) var phase = Phase.open
    /// The client sent its last byte (it may still read).
    private(set) var readEOF = false
    /// Answers wait (and input is not read) while `outputBound` bytes are
    /// queued: a client that pipelines and never reads cannot make Larder
    /// hold answers (and their open files) without bound.
    private(set) var waitingForOutput = false
    /// A file's next bytes are being read into the page cache: no write.
    var waitingForDisk = false
    /// A write is due at the end of this batch of events.
    var flushQueued = false

    let outputBound: Int
    let pipelineBound: Int

    init(outputBound: Int, pipelineBound: Int) {
        self.outputBound = outputBound
        self.pipelineBound = pipelineBound
    }

    var closed: Bool { phase == .closed }
    /// Ending: nothing more is read or answered.
    var closeWhenFlushed: Bool { phase == .closingWhenFlushed || phase == .lingering }
    var lingering: Bool { phase == .lingering }

    // MARK: reading

    /// Whether to read from the socket now.
    @inline(__always)
    func mayRead(_ held: Held) -> Bool {
        !closed && !readEOF && held.unparsed < pipelineBound && !held.uploadCongested
    }

    /// The client closed its side (it may still read).
    mutating func inputEnded() { readEOF = true }

    /// Once the input was taken after the client closed its side: a
    /// request it left unfinished (a body, or a head not complete) can
    /// never complete, so the connection is cut. (Answers in hand, being
    /// made or written, and pipelined requests waiting for the client to
    /// read are finished first: `endIfInputOver`.)
    @inline(__always)
    func cannotFinish(_ held: Held) -> Bool {
        readEOF && (held.body || !held.exchange && held.unparsed > 0 && !waitingForOutput)
    }

    /// What to do with the input before the next request.
    enum Next: Equatable {
        /// Parse and begin the next request.
        case parse
        /// Nothing to take now (an exchange answers, no input, ending).
        case stop
        /// The client leaves too many answers unread: the next waits
        /// until it reads (`paused`: it just began waiting, counted once).
        case waitForOutput(paused: Bool)
    }

    @inline(__always)
    mutating func next(_ held: Held) -> Next {
        guard !closed, !closeWhenFlushed, !held.exchange, !held.body, held.unparsed > 0 else { return .stop }
        guard held.output < outputBound else {
            defer { waitingForOutput = true }
            return .waitForOutput(paused: !waitingForOutput)
        }
        return .parse
    }

    // MARK: answering

    /// An exchange queued its whole answer; `keepAlive`: its request lets
    /// the connection stay open. Returns whether it ends once written.
    @inline(__always)
    mutating func answered(keepAlive: Bool, draining: Bool, _ held: Held) -> Bool {
        if !keepAlive || draining || readEOF && !held.body && held.unparsed == 0 { end() }
        return closeWhenFlushed
    }

    /// After the next pipelined requests were taken: the client has closed
    /// its side and nothing is left to answer, so the connection ends once
    /// what is queued is written (at once when nothing is).
    @inline(__always)
    mutating func endIfInputOver(_ held: Held) -> Bool {
        guard readEOF, !held.exchange, !held.body, !(waitingForOutput && held.unparsed > 0), phase == .open else { return false }
        end()
        return true
    }

    /// The answer is to end the connection (an error with Connection:
    /// close, a response cut after its head).
    @inline(__always)
    mutating func end() {
        if phase == .open { phase = .closingWhenFlushed }
    }

    // MARK: writing

    /// A write left `pending` bytes queued: true when answers had waited
    /// for the client to read and may be taken again.
    @inline(__always)
    mutating func outputTaken(pending: Int) -> Bool {
        guard waitingForOutput && pending < outputBound else { return false }
        waitingForOutput = false
        return true
    }

    /// What follows a write (`done`: nothing is left queued).
    enum AfterWrite: Equatable {
        /// More output is wanted or can wait.
        case none
        /// The exchange may go on producing (an upstream, a body source).
        case drained
        /// All is written and the connection ends (`finish`).
        case finish
    }

    @inline(__always)
    func afterWrite(done: Bool, pending: Int) -> AfterWrite {
        if done && closeWhenFlushed { return .finish }
        return done || pending < outputBound / 4 ? .drained : .none
    }

    /// Once its last answer is written: true to linger, false to close.
    /// After the answer the client may still be sending, and closing with
    /// unread bytes resets the connection, which can destroy the answer
    /// before the client reads it (a 431 to a client still uploading). So,
    /// as nginx does, it lingers (reads and discards for a bounded time),
    /// unless the client is done sending or the worker drains.
    mutating func lingers(draining: Bool) -> Bool {
        guard !readEOF, !draining else { return false }
        phase = .lingering
        return true
    }

    mutating func close() { phase = .closed }

    /// What the socket is watched for.
    @inline(__always)
    func interest(_ held: Held) -> IOEvents {
        // Lingering reads (and only reads) until it closes.
        if lingering { return [.read] }
        var wanted: IOEvents = []
        // A write is already due at the end of this batch: no need to ask
        // epoll (it would cost a system call per response). None is wanted
        // while the next bytes are being read from the disk.
        if held.output > 0 && !flushQueued && !waitingForDisk { wanted.insert(.write) }
        // Stop reading while an answer is pending and enough input is
        // buffered (pipelining bound), or when the client finished sending.
        if !closeWhenFlushed && (held.body || held.output < outputBound) && mayRead(held) { wanted.insert(.read) }
        return wanted
    }
}
