import Configuration
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The terminal while `larder top` draws on it: keys read one at a time
/// without echo (Ctrl-C still interrupts), the cursor hidden, an alternate
/// screen; all put back by `restore`, also after Ctrl-C.
public final class TerminalScreen {
    /// Set by the SIGINT handler: the loop then ends and restores the terminal.
    public static let interrupted = Atomic<Bool>(false)
    private var saved = termios()
    private let hasTermios: Bool

    public init() {
        _ = Self.interrupted.load(ordering: .relaxed)  // made before a signal can ask for it
        hasTermios = tcgetattr(STDIN_FILENO, &saved) == 0
        if hasTermios {
            var raw = saved
            raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
            withUnsafeMutableBytes(of: &raw.c_cc) { cc in
                cc[Int(VMIN)] = 1
                cc[Int(VTIME)] = 0
            }
            tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        }
        signal(SIGINT) { _ in TerminalScreen.interrupted.store(true, ordering: .relaxed) }
        write("\u{1B}[?1049h\u{1B}[?25l")
    }

    /// Replaces the screen's content with `lines`, cut to the window's
    /// width and height (long URLs must not wrap and push the rest off).
    public func draw(_ lines: [String]) {
        var size = winsize()
        var shown = lines
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0, size.ws_row > 0 {
            shown = lines.prefix(Int(size.ws_row) - 1).map { String($0.prefix(Int(size.ws_col))) }
        }
        write("\u{1B}[H\u{1B}[2J" + shown.joined(separator: "\n") + "\n")
    }

    public func restore() {
        write("\u{1B}[?25h\u{1B}[?1049l")
        if hasTermios { tcsetattr(STDIN_FILENO, TCSANOW, &saved) }
        signal(SIGINT, SIG_DFL)
    }

    private func write(_ text: String) {
        var bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress! + done, $0.count - done) }
            if n <= 0 { return }
            done += n
        }
    }
}
