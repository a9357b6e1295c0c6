/// An answer's HTTP/1.1 head as HTTP/2 fields (RFC 9113 section 8.3.2):
/// `:status` first, names in lower case, and none of the fields that are
/// about an HTTP/1.1 connection (section 8.2.2). Pure; unit-tested.
enum ResponseFields {
    typealias Field = (name: [UInt8], value: [UInt8])

    /// The index just past the blank line that ends a head, if it has one.
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        var i = 0
        while i + 1 < bytes.count {
            if bytes[i] == 0x0A {
                if bytes[i + 1] == 0x0A { return i + 2 }
                if i + 2 < bytes.count && bytes[i + 1] == 0x0D && bytes[i + 2] == 0x0A { return i + 3 }
            }
            i += 1
        }
        return nil
    }

    /// The fields of a head ("HTTP/1.1 200 OK\r\nName: value\r\n...\r\n").
    static func from(_ head: [UInt8]) -> [Field] {
        var fields: [Field] = []
        fields.reserveCapacity(16)
        var lines = head.split(separator: 0x0A, omittingEmptySubsequences: false).map { line in
            line.last == 0x0D ? line.dropLast() : line
        }[...]
        guard let statusLine = lines.popFirst() else { return [(Array(":status".utf8), Array("502".utf8))] }
        let parts = statusLine.split(separator: 0x20, maxSplits: 2)
        let status = parts.count >= 2 && parts[1].count == 3 ? Array(parts[1]) : Array("502".utf8)
        fields.append((Array(":status".utf8), status))
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = line[..<colon].map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
            if connectionSpecific.contains(where: { $0.elementsEqual(name) }) { continue }
            var value = line[(colon + 1)...]
            while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
            while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
            fields.append((name, Array(value)))
        }
        return fields
    }

    private static let connectionSpecific: [[UInt8]] = ["connection", "keep-alive", "proxy-connection", "transfer-encoding",
                                                        "upgrade"].map { Array($0.utf8) }
}
