import HTTP1

/// What one client connection is bound by, taken from the configuration
/// when it is accepted (a reload applies to connections accepted after it,
/// as nginx's does).
struct ConnectionSettings {
    var limits: ParseLimits
    /// Bytes of unparsed input held before reading pauses (pipelining bound:
    /// one request is in flight, the next ones wait here).
    var pipelineBufferBytes: Int
    /// Answers wait (and input is not read) while this much output is
    /// queued: a client that pipelines and never reads cannot make Larder
    /// hold answers (and their open files) without bound.
    var outputBoundBytes: Int
    var headerTimeoutMilliseconds: UInt64
    var bodyTimeoutMilliseconds: UInt64
    var keepAliveTimeoutMilliseconds: UInt64
    var sendTimeoutMilliseconds: UInt64
    /// A TLS client's handshake must be done within this.
    var handshakeTimeoutMilliseconds: UInt64
    /// SETTINGS_MAX_CONCURRENT_STREAMS of an HTTP/2 connection.
    var http2MaxConcurrentStreams: Int
    /// Alt-Svc's value on the answers of a TLS listener that also serves
    /// HTTP/3 (`h3=":PORT"; ma=86400`), set per listener; nil elsewhere.
    var altService: String?

    init(_ configuration: ProxyConfiguration) {
        limits = configuration.limits
        pipelineBufferBytes = configuration.pipelineBufferBytes
        outputBoundBytes = configuration.clientBufferBytes
        headerTimeoutMilliseconds = configuration.headerTimeoutMilliseconds
        bodyTimeoutMilliseconds = configuration.bodyTimeoutMilliseconds
        keepAliveTimeoutMilliseconds = configuration.keepAliveTimeoutMilliseconds
        sendTimeoutMilliseconds = configuration.sendTimeoutMilliseconds
        handshakeTimeoutMilliseconds = configuration.handshakeTimeoutMilliseconds
        http2MaxConcurrentStreams = configuration.http2MaxConcurrentStreams
    }
}
