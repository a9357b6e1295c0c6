import CacheSemantics
import CacheStorage
import EventLoop

/// Collapsing across the fleet: the request leading a key's fetch on this
/// node claims it in Redis; when another node holds the claim it waits
/// (bounded by upstream_timeout) for that node's response to reach the
/// shared tier, then serves it, or fetches after all.
extension Exchange {
    /// True when the claim was asked for (the answer continues the exchange).
    func leadAcrossFleet() -> Bool {
        guard let tier = worker.sharedTier else { return false }
        machine.askFleet()  // before asking: a failure may answer at once
        let asked = tier.claim(key, milliseconds: UInt64(worker.configuration.upstream.responseTimeoutMilliseconds)) { [self] claim in
            guard machine.fleetAnswered() else {
                // The client left: let this node's waiters and the fleet go on.
                if claim == .claimed { tier.release(key) }
                return worker.collapser.release(key)
            }
            if claim == .claimed { return forward(leading: true, claimedInFleet: true) }
            lookAgainInFleet(tier)
        }
        if !asked { _ = machine.fleetAnswered() }
        return asked
    }

    /// Another node fetched the key (or the wait ended): serve what it
    /// stored in the shared tier, else fetch.
    private func lookAgainInFleet(_ tier: any SharedTier) {
        machine.askFleet()
        let asked = SharedLookup.ask(tier, key: key, into: worker.store, toDisk: toDisk) { [self] found in
            guard machine.fleetAnswered() else { return worker.collapser.release(key) }
            let now = EventLoop.wallSeconds(), requestCC = requestDirectives
            if case .fresh(let index, let age, let ttl) = Lookup.decide(lookupFacts(requestCC),
                                                                        found, now: now, shared: shared) {
                // This node's waiters find it stored now. Counted as a miss
                // already, and collapsed, as a request that waited locally is.
                worker.collapser.release(key)
                WorkerStats.bump(worker.counters.collapsed)
                if serveStored(found[index], age: age, now: now, cacheStatus: CacheStatus.hit(ttl: ttl, detail: "fleet")) == .served {
                    return
                }
                return forward()
            }
            forward(leading: true)
        }
        if !asked, machine.fleetAnswered() { forward(leading: true) }
    }
}
