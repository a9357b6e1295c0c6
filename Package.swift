// swift-tools-version:6.0
import PackageDescription

// Language mode 5: the event loop is single-threaded per worker and hands C
// callbacks opaque pointers; strict Sendable checking would fight that design
// without making it safer. Cross-thread state (the memory tier) is locked.
//
// Release builds skip the runtime exclusivity checks (about 3 % of the
// instructions of a miss and of a hit, bench/instructions.sh); debug builds,
// which the whole test suite runs, keep them, so a violation still traps there.
let swift5: [SwiftSetting] = [
    .swiftLanguageMode(.v5),
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

let package = Package(
    name: "Larder",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "larder", targets: ["larder"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.1.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
    ],
    targets: [
        // C: epoll loop, timers, eventfd wake-ups, signalfd, socket helpers.
        .target(name: "CEventLoop"),
        // CRC-32C for stored records (the CPU's instruction where it has one).
        .target(name: "CChecksum"),
        // libcurl (libcurl4-openssl-dev's headers), opened at run time with
        // dlopen (a hit needs none of its ~30 libraries); typed, non-variadic shims.
        .target(name: "CCurl"),
        // OpenSSL (libssl3) for TLS towards clients, opened at run time as
        // libcurl is: only types and constants come from its headers.
        .target(name: "CTLS"),
        // TLS contexts (certificates, SNI, ALPN, OCSP) and sessions.
        .target(name: "TLS", dependencies: ["CTLS"], swiftSettings: swift5),
        // hiredis (Redis's protocol, for the fleet) from /usr/include/hiredis;
        // not through pkg-config, whose -D_FILE_OFFSET_BITS SwiftPM refuses.
        .systemLibrary(name: "CHiredis", providers: [.apt(["libhiredis-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
        .systemLibrary(name: "CBrotli", pkgConfig: "libbrotlidec", providers: [.apt(["libbrotli-dev"])]),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        // QUIC and HTTP/3 to clients: libngtcp2 (0.12), its GnuTLS crypto and GnuTLS
        // (QUIC's TLS 1.3), libnghttp3 (0.8), all from Debian.
        .systemLibrary(name: "CQUIC", providers: [.apt(["libngtcp2-dev", "libngtcp2-crypto-gnutls-dev", "libnghttp3-dev",
                                                        "libgnutls28-dev"])]),
        // The bytes of a client connection, plain or through TLS, under every
        // protocol; its deadlines and lingering close. Knows no HTTP.
        .target(name: "Transport", dependencies: ["EventLoop", "TLS"], swiftSettings: swift5),
        // HTTP/2 to clients: one server session per connection over libnghttp2.
        .target(name: "HTTP2", dependencies: ["CNGHTTP2"], swiftSettings: swift5),
        // HTTP/3 to clients: one QUIC connection (ngtcp2, GnuTLS) carrying HTTP/3 (nghttp3).
        .target(name: "HTTP3", dependencies: ["CQUIC", "EventLoop", "HTTP2"], swiftSettings: swift5),
        // gzip (zlib), zstd (libzstd) and brotli (libbrotli): stored bodies decoded
        // for clients that do not accept their coding, and `compress`'s copies.
        .target(name: "Compression", dependencies: ["CZlib", "CZstd", "CBrotli", "EventLoop"], swiftSettings: swift5),
        .target(name: "EventLoop", dependencies: ["CEventLoop"], swiftSettings: swift5),
        // The one wall clock tiers and workers read (tests move it by hand).
        .target(name: "Clocks", dependencies: ["CEventLoop"], swiftSettings: swift5),
        // Named threads, a condition variable, a locked value (no Foundation),
        // and the I/O threads' pool (BlockingWork) that hands results back to a loop.
        .target(name: "Threads", dependencies: ["CEventLoop", "EventLoop"], swiftSettings: swift5),
        // An asynchronous Redis connection driven by a worker's loop.
        .target(name: "Redis", dependencies: ["CHiredis", "EventLoop", "Threads", "TLS"], swiftSettings: swift5),
        // A fleet of nodes on one Redis: purges that reach every node.
        .target(name: "Fleet", dependencies: ["Redis", "EventLoop", "CacheStorage", "CacheSemantics"], swiftSettings: swift5),
        // The one header-field type every HTTP module shares.
        .target(name: "HTTPHeaders", swiftSettings: swift5),
        .target(name: "HTTP1", dependencies: ["HTTPHeaders"], swiftSettings: swift5),
        .target(name: "CacheSemantics", dependencies: ["HTTPHeaders"], swiftSettings: swift5),
        .target(
            name: "CacheStorage",
            dependencies: ["CacheSemantics", "Clocks", "CEventLoop", "EventLoop", "CChecksum", "HTTP1", "HTTPHeaders", "Threads", .product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: swift5
        ),
        // libcurl's multi interface on a worker's loop; the upstream pools and their health checks.
        .target(name: "Upstream", dependencies: ["CCurl", "EventLoop", "HTTP1", "HTTPHeaders", "Threads"], swiftSettings: swift5),
        // Edge controls: header rules, access lists, rate limits, cookie rules (pure, but the limiter's shared table).
        .target(name: "EdgeControls", dependencies: ["HTTPHeaders"], swiftSettings: swift5),
        // Routes: which settings a request gets (prefixes, globs, virtual hosts).
        .target(name: "Routing", dependencies: ["CacheSemantics", "CacheStorage", "TLS", "EdgeControls"], swiftSettings: swift5),
        // Bytes and text written out: a growing buffer, pieces at a cursor, JSON strings.
        .target(name: "Bytes", swiftSettings: swift5),
        // What is told of the traffic: access log, request log, log feed,
        // counters, latency histograms, samples, the fault summary.
        .target(name: "Telemetry", dependencies: ["Bytes", "EventLoop", "Clocks", "HTTP1", "Threads"], swiftSettings: swift5),
        .target(
            name: "Proxy",
            dependencies: [
                "EventLoop", "Clocks", "HTTP1", "HTTPHeaders", "CacheSemantics", "CacheStorage", "Upstream", "Compression", "TLS", "HTTP2", "HTTP3",
                "Threads", "Telemetry", "Bytes", "Routing", "Transport", "Admin", "EdgeControls", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swift5
        ),
        // The admin listener: purge, stats, metrics (its own thread and loop).
        .target(
            name: "Admin",
            dependencies: [
                "EventLoop", "HTTP1", "HTTPHeaders", "CacheStorage", "Telemetry", "Threads", "Bytes", "Upstream", "Transport",
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swift5
        ),
        // The configuration file read into every module's settings, its
        // checks and its effective form (a library: tested without the binary).
        .target(
            name: "Configuration",
            dependencies: [
                "Proxy", "Routing", "Telemetry", "Upstream", "Redis", "TLS", "HTTP1", "HTTP3", "CacheSemantics", "CacheStorage", "Threads", "Bytes",
                "Compression",
                "EdgeControls",
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swift5 + [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        // What the admin tools (`top`, `purge`, `stats`, `log`) use: one
        // request to the admin API, and `top`'s figures and screen.
        .target(
            name: "AdminClient",
            dependencies: ["CCurl", "Upstream", "Telemetry", "Configuration"],
            swiftSettings: swift5 + [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        .executableTarget(
            name: "larder",
            dependencies: [
                "Configuration", "AdminClient", "Proxy", "Admin", "Telemetry", "Routing", "EventLoop", "Clocks", "Upstream", "CacheStorage", "CacheSemantics", "CCurl", "Fleet", "Redis", "Threads", "TLS", "HTTP3",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // MemberImportVisibility: TOMLKit imports Foundation.Data, which
            // would otherwise make all of Foundation's String methods visible here
            // and link Foundation, CoreFoundation and ICU (see Threads).
            swiftSettings: swift5 + [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        // bench/store-threads.sh: store lookups from 1 and 2 threads, in-process.
        .executableTarget(name: "store-bench", dependencies: ["CacheStorage", "CacheSemantics", "Clocks", "Proxy", "Telemetry", "Threads"],
                          path: "Sources/StoreBench", swiftSettings: swift5),
        .testTarget(name: "HTTPHeadersTests", dependencies: ["HTTPHeaders"], swiftSettings: swift5),
        .testTarget(name: "HTTP1Tests", dependencies: ["HTTP1", "HTTPHeaders"], swiftSettings: swift5),
        .testTarget(name: "CacheSemanticsTests", dependencies: ["CacheSemantics", "HTTPHeaders"], swiftSettings: swift5),
        .testTarget(name: "CacheStorageTests", dependencies: ["CacheStorage", "CChecksum", "Clocks", "Threads", "HTTP1", "HTTPHeaders", "TestSupport"], swiftSettings: swift5),
        .testTarget(name: "EventLoopTests", dependencies: ["EventLoop"], swiftSettings: swift5),
        .testTarget(name: "HTTP2Tests", dependencies: ["HTTP2"], swiftSettings: swift5),
        .testTarget(name: "HTTP3Tests", dependencies: ["HTTP3", "CQUIC", "EventLoop"], swiftSettings: swift5),
        .testTarget(name: "TransportTests", dependencies: ["Transport", "TLS", "EventLoop", "TestSupport"], swiftSettings: swift5),
        .testTarget(name: "ThreadsTests", dependencies: ["Threads", "EventLoop"], swiftSettings: swift5),
        .testTarget(name: "TelemetryTests", dependencies: ["Telemetry", "Bytes", "EventLoop", "HTTP1"], swiftSettings: swift5),
        .testTarget(name: "EdgeControlsTests", dependencies: ["EdgeControls", "HTTPHeaders"], swiftSettings: swift5),
        .testTarget(name: "RoutingTests", dependencies: ["Routing", "CacheSemantics", "CacheStorage"], swiftSettings: swift5),
        .testTarget(name: "ConfigurationTests", dependencies: ["Configuration", "EdgeControls", "Proxy", "Routing", "Upstream", "CacheSemantics", "CacheStorage", "Telemetry"],
                    swiftSettings: swift5),
        .testTarget(name: "AdminClientTests", dependencies: ["AdminClient", "Telemetry"], swiftSettings: swift5),
        .testTarget(name: "UpstreamTests", dependencies: ["Upstream"], swiftSettings: swift5),
        .testTarget(name: "CompressionTests", dependencies: ["Compression", "EventLoop"], swiftSettings: swift5),
        // What several test targets start: free loopback ports, redis-server.
        .target(name: "TestSupport", dependencies: ["CEventLoop"], path: "Tests/TestSupport", swiftSettings: swift5),
        .testTarget(name: "RedisTests", dependencies: ["Redis", "EventLoop", "TestSupport", "TLS"], swiftSettings: swift5),
        .testTarget(name: "FleetTests", dependencies: ["Fleet", "Redis", "EventLoop", "CacheStorage", "TestSupport"],
                    swiftSettings: swift5),
        .testTarget(name: "AdminTests", dependencies: ["Admin", "CacheStorage", "Telemetry", "Upstream", "Routing", "HTTPHeaders"], swiftSettings: swift5),
        .testTarget(name: "ProxyTests", dependencies: ["Proxy", "EdgeControls", "Telemetry", "Routing", "Clocks", "CacheSemantics", "CacheStorage", "HTTP1", "HTTPHeaders", "EventLoop",
                                                  "Upstream", "TestSupport", .product(name: "Logging", package: "swift-log")],
                    swiftSettings: swift5),
        .testTarget(
            name: "EndToEndTests",
            // CZlib: the status page's screenshot (a PNG) is decoded to check its pixels. CacheStorage: hostile
            // records in the disk format are planted in Redis.
            dependencies: ["larder", "Configuration", "TestSupport", "CZlib", "CacheStorage", "CacheSemantics", "Threads"],
            exclude: ["origin.py", "websocket_echo.py", "h2client.py", "h2attacks.py", "h3client.py", "h3attacks.py"],
            swiftSettings: swift5
        ),
    ]
)
