import EventLoop
import Synchronization

/// Loops whose transfers wait for libcurl while another thread loads it
/// (`UpstreamClient.startTransfer`): each is handed its closure once the
/// load is done (`loaded`, from the loading thread), on its own thread.
enum LibraryWait {
    private struct State {
        var loaded = false
        var waiting: [(loop: EventLoop, then: () -> Void)] = []
    }

    private static let state = Mutex(State())

    /// Runs `then` on `loop` once libcurl is loaded (at once if it is now).
    static func add(on loop: EventLoop, _ then: @escaping () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.loaded { return true }
            state.waiting.append((loop, then))
            return false
        }
        if now { loop.execute(then) }
    }

    /// libcurl is loaded: every waiting loop goes on.
    static func loaded() {
        let waiting = state.withLock { state in
            state.loaded = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for (loop, then) in waiting { loop.execute(then) }
    }
}
