import HTTP1

/// What an HTTP/1.1 connection hands one request to, and tells about it:
/// the proxy's `Exchange`, or another handler on the same transport (the
/// admin API's `AdminExchange`). It answers through the connection as its
/// `ResponseSink` and ends with `exchangeFinished` or `exchangeAborted`.
protocol ConnectionRequest: AnyObject {
    func start()
    /// Request-body bytes as they arrive (chunked framing removed).
    func requestBody(_ bytes: UnsafeRawBufferPointer)
    func requestBodyEnd()
    /// Whether body bytes wait for the upstream (reading pauses meanwhile).
    var isUploadCongested: Bool { get }
    /// Whether any of the answer went out (a broken request can then only be cut).
    var responseStarted: Bool { get }
    /// The client caught up with the output.
    func outputDrained()
    /// The client took no output for send_timeout (`cancel` follows).
    func sendTimedOut(after milliseconds: UInt64)
    /// The connection went away.
    func cancel()
}

extension ConnectionRequest {
    func sendTimedOut(after milliseconds: UInt64) {}  // (counted by the connection; the proxy's exchanges say no more)
}

/// Who answers a connection's requests.
enum Responder {
    /// The proxy: each request is an `Exchange` made with these parts.
    case proxy(ExchangeParts)
    /// Another handler, made per request with the connection it answers on.
    case handler((RequestHead, ClientConnection) -> any ConnectionRequest)
}

extension Exchange: ConnectionRequest {}
