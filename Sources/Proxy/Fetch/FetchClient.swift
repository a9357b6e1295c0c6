import CacheSemantics
import CacheStorage
import HTTP1
import HTTPHeaders

/// Whom a fetch answers (an `Exchange`; a stand-in in ProxyTests): the
/// request it is for, and what it is told. A collapsed request hears the
/// body and its end the same way from the leader's shared response
/// (`SharedFetchReader`).
protocol FetchClient: AnyObject {
    var request: RequestHead { get }
    var key: String { get }
    var isCacheLookup: Bool { get }
    /// What the lookup found (validators, the variants a response replaces).
    var variants: Variants { get }
    var toDisk: Bool { get }
    /// The client's address (X-Forwarded-For of fetches made for it).
    var peer: String { get }
    /// The named upstream its requests go to (nil: the default).
    var upstreamName: String? { get }
    /// The upstream's head: false when the client answered otherwise (a
    /// stand-in for a 5xx, a 304's refresh) and wants no more of it.
    func takes(_ response: UpstreamResponse) -> Bool
    /// The head goes to the client (`stored`: the response is being stored).
    func streams(_ response: UpstreamResponse, stored: Bool)
    /// Whether the client is behind (the fetch pauses, unless followers stream it).
    var isCongested: Bool { get }
    func deliver(_ chunk: Bytes)
    func deliver(copying bytes: UnsafeRawBufferPointer)
    /// The body came whole (as long as it said): false when the client's
    /// own check of it fails (a completion's parts that do not make its
    /// answer), and then nothing of it is stored either.
    func endsBody() -> Bool
    /// The body ended; `whole`: as long as it said, and taken by `endsBody`.
    func responseEnded(whole: Bool)
    /// The response broke off after its head.
    func responseCut()
    /// The upstream failed before any response.
    func fetchFailed(_ kind: UpstreamFailure.Kind, detail: String)
    /// An interim response (103, 102) before the final head.
    func interim(status: Int, fields: HeaderFields)
    /// The upstream took every request-body byte supplied: more may come.
    func requestBodyDrained()
}

extension FetchClient {
    var upstreamName: String? { nil }
    func endsBody() -> Bool { true }
}

extension RequestHead {
    /// The same request as a GET (a HEAD fetched to be stored).
    var asGet: RequestHead {
        var get = self
        get.method = "GET"
        return get
    }
}
