// swift-tools-version:6.0
// Not part of Larder's build: measures what one request's header fields
// cost as swift-http-types' HTTPFields against Larder's HeaderFields
// (run.sh counts instructions with callgrind).
import PackageDescription

let package = Package(
    name: "field-types",
    dependencies: [
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
    ],
    targets: [
        // Larder's own module, through a symbolic link to ../../Sources/HTTPHeaders.
        .target(name: "HTTPHeaders", swiftSettings: [.swiftLanguageMode(.v5)]),
        .executableTarget(
            name: "field-types",
            dependencies: [.product(name: "HTTPTypes", package: "swift-http-types"), "HTTPHeaders"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
    ]
)
