/// A response body that its exchange's sink pulls in bounded pieces as the
/// client drains: a stored gzip body decoded a window at a time
/// (`DecodingBody`), or a leader's shared response as it arrives
/// (`SharedFetchReader`). (A stored body in memory or in a file is queued
/// by reference and written as the socket takes it, never copied for one
/// client; an upstream transfer pushes its pieces and is paused while the
/// sink is behind, resumed when it drains.) `Exchange+Body` drives one.
protocol BodySource: AnyObject {
    /// Bytes handed over per pull at most (then other connections' events).
    var pullBudget: Int { get }
    /// Hands pieces to `sink` until `budget` bytes went, the sink is
    /// behind, or nothing more is at hand.
    func pull(into sink: any ResponseSink, budget: Int) -> BodyPull
    /// The client left or the answer is over: nothing more is pulled, and
    /// the source lets go of what it holds.
    func stop()
}

/// What a pull left.
enum BodyPull: Equatable {
    /// More is at hand: pull again (on a later loop turn, or once the sink drained).
    case more
    /// Nothing at hand yet: the source says when there is (its `ready`).
    case waiting
    /// The whole body went.
    case ended
    /// It broke off after the head (`why`, for the log): the client is cut.
    case cut(String)
}
