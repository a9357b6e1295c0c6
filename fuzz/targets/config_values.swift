// libFuzzer target: the config loader's own value parsers (Sources/larder/
// Units.swift: sizes, durations, lifetimes and presets, HOST:PORT, upstream
// URLs). The TOML syntax itself is TOMLKit's; the config corpus is also
// replayed through `larder check-config` by the test suite. The first byte
// picks the parser.
@_cdecl("LLVMFuzzerTestOneInput")
public func configValuesFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let text = String(decoding: UnsafeBufferPointer(start: data + 1, count: size - 1), as: UTF8.self)
    switch data[0] % 5 {
    case 0: if let bytes = Units.parseSize(text) { precondition(bytes >= 0) }
    case 1: if let ms = Units.parseDurationMilliseconds(text) { precondition(ms >= 0) }
    case 2: if case .some(.some(let seconds)) = Units.parseLifetimeSeconds(text) { precondition(seconds >= 0) }
    case 3: if let hp = Units.parseHostPort(text) { precondition(!hp.host.isEmpty) }
    default: _ = Units.validUpstream(text)
    }
    return 0
}
