/// A client connection as its worker sees it, whatever it speaks
/// (`ClientConnection` for HTTP/1.1, `HTTP2Connection`): closed, cut or
/// drained when the worker shuts down.
protocol ClientTransport: AnyObject {
    /// Nothing in progress.
    var isIdle: Bool { get }
    /// Shutting down: finish what was taken, take nothing new, then close.
    func drain()
    /// Cancels what is in progress and closes.
    func abort()
    func close()
}
