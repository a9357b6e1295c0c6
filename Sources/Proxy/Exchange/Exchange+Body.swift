/// The exchange's body source, pulled as the sink drains: at most a
/// budget per loop turn, nothing while the client is behind (the sink's
/// drain calls `outputDrained`, which pulls on), and the end or a cut
/// completing the exchange.
extension Exchange {
    /// Starts pulling `source` (its head is written).
    func stream(from source: any BodySource) {
        body = source
        pullBody()
    }

    /// Continues on a later loop turn (once), so other connections' events come first.
    func schedulePull() {
        guard !pullScheduled, body != nil else { return }
        pullScheduled = true
        loop.schedule(after: 0) { [weak self] in
            guard let self else { return }
            self.pullScheduled = false
            self.pullBody()
        }
    }

    /// One pull, and what it leads to.
    func pullBody() {
        guard let source = body, !machine.clientDone, !sink.isBodyCongested else { return }
        switch source.pull(into: sink, budget: source.pullBudget) {
        case .more:
            // Behind: `outputDrained` continues; else the next turn does.
            if !sink.isBodyCongested { schedulePull() }
        case .waiting:
            break
        case .ended:
            complete(closing: sink.endBody(whole: true))
        case .cut:
            complete(closing: true)
        }
    }
}
