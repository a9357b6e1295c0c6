import CEventLoop

/// What a test moves instead of waiting: every clock of the process, the
/// monotonic one under the loops' timers and deadlines and the wall clock
/// under ages and lifetimes (`WallClock`), moved on together. The daemon
/// takes it only when started with `LARDER_TEST_CLOCK=1` (the admin API's
/// `POST /debug/clock?advance=SECONDS`); in service nothing moves it.
public enum TestClock {
    /// Moves every clock on by `milliseconds`. Loops waiting in a poll see
    /// it once woken (their timers then due fire at once).
    public static func advance(milliseconds: Int64) {
        precondition(milliseconds >= 0, "clocks only move on")
        el_clock_advance(milliseconds)
    }
}
