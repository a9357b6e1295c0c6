import CZlib
import Foundation

/// The pixels of a PNG file (8-bit RGB or RGBA, not interlaced: what
/// Chromium's screenshots are), enough to check what a page drew.
struct PNGImage {
    let width: Int, height: Int
    /// Red, green, blue of each pixel, row by row.
    private(set) var rgb: [UInt8] = []

    init(contentsOf path: String) throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        guard bytes.count > 8, bytes.prefix(8).elementsEqual([137, 80, 78, 71, 13, 10, 26, 10]) else { throw HarnessError("\(path) is not a PNG") }
        var offset = 8, header: [UInt8] = [], compressed: [UInt8] = []
        func be32(_ i: Int) -> Int { Int(bytes[i]) << 24 | Int(bytes[i + 1]) << 16 | Int(bytes[i + 2]) << 8 | Int(bytes[i + 3]) }
        while offset + 12 <= bytes.count {
            let length = be32(offset), type = String(decoding: bytes[(offset + 4)..<(offset + 8)], as: UTF8.self)
            guard offset + 12 + length <= bytes.count else { throw HarnessError("\(path): chunk \(type) cut short") }
            let data = bytes[(offset + 8)..<(offset + 8 + length)]
            if type == "IHDR" { header = Array(data) } else if type == "IDAT" { compressed += data }
            offset += 12 + length
            if type == "IEND" { break }
        }
        guard header.count == 13 else { throw HarnessError("\(path): no IHDR") }
        width = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        height = Int(header[4]) << 24 | Int(header[5]) << 16 | Int(header[6]) << 8 | Int(header[7])
        let channels: Int
        switch (header[8], header[9], header[12]) {
        case (8, 2, 0): channels = 3
        case (8, 6, 0): channels = 4
        default: throw HarnessError("\(path): only 8-bit RGB(A) without interlacing is read (\(header[8]), \(header[9]), \(header[12]))")
        }
        let stride = width * channels
        var raw = [UInt8](repeating: 0, count: height * (stride + 1))
        var rawLength = uLongf(raw.count)
        let status = compressed.withUnsafeBufferPointer { source in
            raw.withUnsafeMutableBufferPointer { uncompress($0.baseAddress, &rawLength, source.baseAddress, uLong(source.count)) }
        }
        guard status == Z_OK, Int(rawLength) == raw.count else { throw HarnessError("\(path): image data does not inflate (\(status))") }
        var previous = [UInt8](repeating: 0, count: stride), row = previous
        rgb.reserveCapacity(width * height * 3)
        for y in 0..<height {
            let filter = raw[y * (stride + 1)], start = y * (stride + 1) + 1
            for x in 0..<stride {
                let a = x >= channels ? Int(row[x - channels]) : 0, b = Int(previous[x]), c = x >= channels ? Int(previous[x - channels]) : 0
                let predicted: Int
                switch filter {
                case 0: predicted = 0
                case 1: predicted = a
                case 2: predicted = b
                case 3: predicted = (a + b) / 2
                case 4:
                    let p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c)
                    predicted = pa <= pb && pa <= pc ? a : (pb <= pc ? b : c)
                default: throw HarnessError("\(path): unknown row filter \(filter)")
                }
                row[x] = UInt8(truncatingIfNeeded: Int(raw[start + x]) + predicted)
            }
            for x in 0..<width { rgb += row[(x * channels)..<(x * channels + 3)] }
            previous = row
        }
    }

    /// Pixels within `tolerance` of `color` (0xRRGGBB) on every channel.
    func count(_ color: UInt32, tolerance: Int = 12) -> Int {
        let target = [Int(color >> 16 & 0xFF), Int(color >> 8 & 0xFF), Int(color & 0xFF)]
        var n = 0
        for i in stride(from: 0, to: rgb.count, by: 3)
        where abs(Int(rgb[i]) - target[0]) <= tolerance && abs(Int(rgb[i + 1]) - target[1]) <= tolerance
            && abs(Int(rgb[i + 2]) - target[2]) <= tolerance {
            n += 1
        }
        return n
    }
}
