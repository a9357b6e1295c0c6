/// The proxy's one way to the upstream: start a request, then steer its
/// transfer through the handle returned; the response comes to the
/// delegate. `UpstreamClient` (libcurl) is the real one; ProxyTests drive
/// fetches through a stand-in, without sockets.
public protocol UpstreamRequester: AnyObject {
    /// Applies to transfers started after it is set.
    var settings: UpstreamSettings { get set }
    /// Starts a transfer. The delegate hears about it on the loop's thread,
    /// never from inside this call.
    func start(_ request: UpstreamRequest, delegate: UpstreamTransferDelegate) -> any UpstreamTransferControl
}

/// One transfer as its owner steers it: the request body's way out, a
/// pause lifted, an end.
public protocol UpstreamTransferControl: AnyObject {
    /// Bytes of request body waiting to be sent.
    var bufferedBodyBytes: Int { get }
    /// Called on a later loop turn once every buffered request-body byte
    /// went out, so the supplier can send more.
    var onBodyDrained: (() -> Void)? { get set }
    /// Hands request-body bytes to the transfer.
    func supply(_ bytes: UnsafeRawBufferPointer)
    /// The request body is complete.
    func finishBody()
    /// Continues a transfer the delegate paused by refusing body bytes.
    func resume()
    /// Abandons the transfer; the delegate hears nothing more.
    func cancel()
}

extension UpstreamClient: UpstreamRequester {
    public func start(_ request: UpstreamRequest, delegate: UpstreamTransferDelegate) -> any UpstreamTransferControl {
        startTransfer(request, delegate: delegate)
    }
}

extension UpstreamTransfer: UpstreamTransferControl {}
