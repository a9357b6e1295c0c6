import Threads

/// What one worker hands the admin thread: the worker pushes, the admin
/// thread takes everything at once. Bounded: past `capacity` items are
/// dropped and counted, so a slow or absent reader never makes a worker
/// wait or grow without end. One per worker, so workers share no lock.
public final class WorkerQueue<Element: Sendable>: Sendable {
    public let capacity: Int
    private let state = Locked<(items: [Element], dropped: Int)>(([], 0))

    public init(capacity: Int) { self.capacity = capacity }

    public func push(_ item: Element) {
        state.withLock { state in
            if state.items.count < capacity { state.items.append(item) } else { state.dropped += 1 }
        }
    }

    public func take() -> (items: [Element], dropped: Int) {
        state.withLock { state in
            defer { state = ([], 0) }
            return state
        }
    }
}

/// Every worker's queue of one kind, drained together by the admin thread.
public final class WorkerQueues<Element: Sendable>: Sendable {
    private let queues = Locked<[WorkerQueue<Element>]>([])
    private let capacity: Int

    public init(capacity: Int) { self.capacity = capacity }

    public func make() -> WorkerQueue<Element> {
        let queue = WorkerQueue<Element>(capacity: capacity)
        queues.withLock { $0.append(queue) }
        return queue
    }

    /// What every worker queued since the last call, and how many they dropped.
    public func drain() -> (items: [Element], dropped: Int) {
        var items: [Element] = [], dropped = 0
        for queue in queues.withLock({ $0 }) {
            let (taken, lost) = queue.take()
            items.append(contentsOf: taken)
            dropped += lost
        }
        return (items, dropped)
    }
}
