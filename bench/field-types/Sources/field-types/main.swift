// One request's fields as a parser meets them (raw "Name: value" lines),
// turned into a field list, then the look-ups a hit makes. `larder` does
// what Larder's parser does (name lowercased while copied, no other scan);
// `http-types` builds swift-http-types' HTTPField.Name and HTTPField (each
// validated, the name kept raw and lowercased) into HTTPFields.
import HTTPHeaders
import HTTPTypes

let lines: [(name: [UInt8], value: [UInt8])] = [
    ("Host", "127.0.0.1:8080"), ("User-Agent", "wrk"), ("Accept", "*/*"),
    ("Accept-Encoding", "gzip"), ("X-Request-Id", "abc123"), ("Connection", "keep-alive"),
].map { (Array($0.0.utf8), Array($0.1.utf8)) }

@inline(never) func larder() -> Int {
    var fields = HeaderFields()
    fields.reserveCapacity(16)
    for line in lines {
        let name = String(unsafeUninitializedCapacity: line.name.count) { out in
            for (i, b) in line.name.enumerated() { out[i] = b >= 0x41 && b <= 0x5A ? b | 0x20 : b }
            return line.name.count
        }
        fields.append(HeaderField(lowercasedName: name, value: String(decoding: line.value, as: UTF8.self)))
    }
    var total = 0
    for wanted in ["cache-control", "if-none-match", "authorization", "larder-cache-policy"] {
        total += fields[wanted]?.utf8.count ?? 1
    }
    return total
}

@inline(never) func httpTypes() -> Int {
    var fields = HTTPFields()
    fields.reserveCapacity(16)
    for line in lines {
        guard let name = HTTPField.Name(String(decoding: line.name, as: UTF8.self)) else { continue }
        fields.append(HTTPField(name: name, value: String(decoding: line.value, as: UTF8.self)))
    }
    var total = 0
    for wanted: HTTPField.Name in [.cacheControl, .ifNoneMatch, .authorization, HTTPField.Name("larder-cache-policy")!] {
        total += fields[wanted]?.utf8.count ?? 1
    }
    return total
}

let which = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "larder"
let rounds = CommandLine.arguments.count > 2 ? Int(CommandLine.arguments[2]) ?? 1 : 1
var sum = 0
for _ in 0..<rounds { sum &+= which == "http-types" ? httpTypes() : larder() }
print(sum)
