import XCTest
@testable import CacheSemantics

/// Cached POST bodies: which may be cached, and their canonical JSON.
final class JSONQueryTests: XCTestCase {
    private func canonical(_ text: String) -> String? { JSONQuery.canonical(Array(text.utf8)).map { String(decoding: $0, as: UTF8.self) } }
    private func refusal(_ text: String, _ methods: [String] = []) -> String? { JSONQuery.refusal(Array(text.utf8), uncachedMethods: methods) }

    func testCanonicalJSONSortsKeysAndDropsWhitespaceAtEveryLevel() {
        XCTAssertEqual(canonical(#" { "b" : [ 1 , {"y":2,"x":1} ] ,"a":"s p a c e" } "#), #"{"a":"s p a c e","b":[1,{"x":1,"y":2}]}"#)
        XCTAssertEqual(canonical(#"{"a":1}"#), canonical("{\n  \"a\": 1\n}"), "the same query however it is laid out")
        XCTAssertNotEqual(canonical(#"{"a":1}"#), canonical(#"{"a":2}"#))
        XCTAssertEqual(canonical(#"[true,false,null,-1.5e+3,"\u00e9\n"]"#), #"[true,false,null,-1.5e+3,"\u00e9\n"]"#)
        XCTAssertEqual(canonical(#"{"k":1,"k":2}"#), #"{"k":1,"k":2}"#, "repeated keys keep their order")
    }

    func testWhatIsNotJSONHasNoCanonicalForm() {
        for bad in ["", "{", #"{"a":}"#, #"{"a" 1}"#, "[1,]", "01x", #""unterminated"#, "{\"a\":\"\u{01}\"}", #"{"a":"\x"}"#,
                    "nul", "[1] 2", String(repeating: "[", count: 65) + String(repeating: "]", count: 65)] {
            XCTAssertNil(canonical(bad), bad)
        }
        XCTAssertNotNil(canonical(String(repeating: "[", count: 64) + String(repeating: "]", count: 64)), "64 levels are read")
    }

    func testGraphQLWritesAndListedRPCMethodsAreNeverCached() {
        XCTAssertNil(refusal(#"{"query":"{ user(id: 1) { name } }"}"#))
        XCTAssertNil(refusal(#"{"query":"query Q { mutationCount }","operationName":"Q"}"#), "a field named like a keyword")
        XCTAssertEqual(refusal(#"{"query":"mutation { like(id: 1) }"}"#), "a GraphQL mutation")
        XCTAssertEqual(refusal(#"{"query":"  # note\n subscription S { ticks }"}"#), "a GraphQL subscription")
        XCTAssertEqual(refusal(#"{"query":"query A { a } mutation B { b }","operationName":"A"}"#), "a GraphQL mutation",
                       "a document that defines a write is never cached, whichever operation is named")
        XCTAssertNil(refusal(#"{"query":"{ a(text: \"mutation\") }"}"#), "a keyword inside a string")
        XCTAssertNil(refusal(#"{"query":"\"\"\"mutation\"\"\" query { a }"}"#), "or a block string")
        XCTAssertEqual(refusal(#"[{"query":"{ a }"},{"query":"mutation { b }"}]"#), "a GraphQL mutation", "in a batch")
        XCTAssertEqual(refusal(#"{"query":"\u006dutation { b }"}"#), "a GraphQL mutation", "escapes decoded first")
        let methods = ["eth_sendRawTransaction"]
        XCTAssertNil(refusal(#"{"jsonrpc":"2.0","method":"eth_getBalance","params":[],"id":1}"#, methods))
        XCTAssertEqual(refusal(#"{"jsonrpc":"2.0","method":"eth_sendRawTransaction","id":1}"#, methods),
                       "JSON-RPC method eth_sendRawTransaction")
        XCTAssertNotNil(refusal(#"[{"method":"a"},{"method":"eth_sendRawTransaction"}]"#, methods))
        XCTAssertNil(refusal("name=value&x=1"), "not JSON: cached by its bytes")
    }
}
