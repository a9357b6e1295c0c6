// Store lookups from 1 and 2 threads, in-process (no sockets): what a hit
// costs the store, and whether a second thread slows the first. Run by
// bench/store-threads.sh; not a test.
import CacheSemantics
import CacheStorage
import Clocks
import Proxy
import Routing
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

func nanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func response(_ key: String, at now: Int64) -> CachedResponse {
    let head = Array("HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nContent-Type: application/octet-stream\r\n".utf8)
    let body = [UInt8](repeating: 0x61, count: 1024)
    return CachedResponse.make(key: key, status: 200, headPrefix: head, body: body,
                               timing: ResponseTiming(requestTime: now, responseTime: now, dateValue: now, ageValue: 0),
                               lifetime: 3600, cacheControl: CacheControl("max-age=3600"), varyNames: [], varyValues: [])
}

/// Nanoseconds per lookup on each of `threads` threads doing `count` lookups at once.
func run(_ store: TieredStore, keys: [String], threads: Int, count: Int) -> Double {
    let ready = Atomic<Int>(0), done = Atomic<Int>(0)
    let go = Atomic<Bool>(false)
    let elapsed = Mutex<[UInt64]>([])
    for t in 0..<threads {
        try! startThread(name: "bench-\(t)") {
            let local = LocalHits()
            var state = UInt64(t + 1) &* 0x9E37_79B9_7F4A_7C15
            ready.add(1, ordering: .releasing)
            while !go.load(ordering: .acquiring) {}
            let start = nanoseconds()
            var found = 0
            for i in 0..<count {
                // A worker's loop turn: 32 hits.
                if i & 31 == 0 { local.endPeriod() }
                state = state &* 6364136223846793005 &+ 1442695040888963407
                let key = keys[Int(state >> 33) % keys.count]
                found &+= store.lookupWithoutBlocking(key, local: local)?.count ?? 0
            }
            let took = nanoseconds() - start
            local.endPeriod()
            precondition(found == count, "every lookup is a hit")
            elapsed.withLock { $0.append(took) }
            done.add(1, ordering: .releasing)
        }
    }
    while ready.load(ordering: .acquiring) < threads {}
    go.store(true, ordering: .releasing)
    while done.load(ordering: .acquiring) < threads { usleep(1000) }
    let times = elapsed.withLock { $0 }
    return Double(times.reduce(0, +)) / Double(times.count) / Double(count)
}

let count = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 2_000_000
let clock = WallClock()
var route = Route(prefix: "/routed/")
route.memoryTTL = .some(3600)
let cases: [(name: String, keys: [String], rules: RouteTable?)] = [
    ("one hot key", ["/hot"], nil),
    ("10,000 keys", (0..<10_000).map { "/k/\($0)" }, nil),
    ("one hot key, routed", ["/routed/hot"], RouteTable([route, Route(prefix: "/other/")])),
]
print("case                    1 thread ns  2 threads ns  ratio")
// ONLY=N: that case alone, at 2 threads, for a profiler.
let only = Int(CommandLine.arguments.dropFirst(2).first ?? "")
for (n, c) in cases.enumerated() where only == nil || only == n {
    let store = TieredStore(tiers: [MemoryTier(limitBytes: 256 << 20, clock: clock)])
    store.setLifetimeRules(c.rules)
    for key in c.keys { store.insert(response(key, at: clock.now()), fetchedSince: store.fetchToken) }
    _ = run(store, keys: c.keys, threads: 1, count: count / 10)  // warm up
    if only != nil {
        print(c.name, run(store, keys: c.keys, threads: 2, count: count))
        continue
    }
    let one = run(store, keys: c.keys, threads: 1, count: count)
    let two = run(store, keys: c.keys, threads: 2, count: count)
    func fixed(_ value: Double, _ width: Int, _ places: Int) -> String {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        let n = Int((value * scale).rounded())
        let digits = places == 0 ? "\(n)" : "\(n / Int(scale)).\(String(String(n % Int(scale) + Int(scale)).dropFirst()))"
        return String(repeating: " ", count: max(0, width - digits.count)) + digits
    }
    print(c.name + String(repeating: " ", count: 24 - c.name.count) + fixed(one, 11, 1) + "  " + fixed(two, 12, 1) + "  "
          + fixed(two / one, 5, 2))
}
