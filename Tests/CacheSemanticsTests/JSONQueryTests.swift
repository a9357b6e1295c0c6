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
        XCTAssertEqual(canonical(#"{"\u0062":1,"a":"\u0061"}"#), #"{"a":"\u0061","b":1}"#,
                       "keys decoded before they are compared, and written in one form")
        XCTAssertEqual(canonical(#"{"\ud83d\ude00":1}"#), "{\"\u{1F600}\":1}", "a surrogate pair is one character")
        XCTAssertNotEqual(canonical(#"{"\ud83d\ude00":1}"#), canonical(#"{"\ud83d\ude01":1}"#))
        XCTAssertEqual(canonical(#"{"a\"b":1,"c\u0001":2}"#), #"{"a\"b":1,"c\u0001":2}"#)
    }

    /// Issue 59: `{"id":1,"\u0069d":2}` and `{"\u0069d":2,"id":1}` mean id 2
    /// and id 1 to a last-wins reader, and were one key. A body that
    /// repeats a key, at any depth and however the key is written, has no
    /// canonical form and is never cached.
    func testARepeatedKeyHasNoCanonicalFormAndIsNeverCached() {
        for body in [#"{"k":1,"k":2}"#, #"{"id":1,"\u0069d":2}"#, #"{"\u0069d":2,"id":1}"#,
                     #"{"query":"{ a }","variables":{"id":1,"\u0069d":2}}"#,
                     #"[{"query":"{ a }"},{"query":"{ b }","x":[{"y":1,"y":1}]}]"#,
                     #"{"query":"{ a }","query":"mutation { b }"}"#,
                     #"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"query":"{ a }","\u0061":0}"#] {
            XCTAssertNil(canonical(body), body)
            XCTAssertEqual(refusal(body), "an object with a repeated key", body)
        }
        XCTAssertNil(canonical(#"{"a":"\ud800"}"#), "a lone surrogate is no text")
        XCTAssertNil(canonical(#"{"\udc00x":1}"#))
        XCTAssertNil(canonical(#"{"\ud800\u0041":1}"#), "a high surrogate needs a low one")
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
        XCTAssertNil(refusal(#"{"query":"query { a(t: \"\"\"mutation\"\"\") }"}"#), "or a block string")
        XCTAssertNil(refusal(#"{"query":"query Q($id: ID = 1) @live { ...F } fragment F on T { a }"}"#), "fragments too")
        XCTAssertEqual(refusal(#"[{"query":"{ a }"},{"query":"mutation { b }"}]"#), "a GraphQL mutation", "in a batch")
        XCTAssertEqual(refusal(#"{"query":"\u006dutation { b }"}"#), "a GraphQL mutation", "escapes decoded first")
        let methods = ["eth_sendRawTransaction"]
        XCTAssertNil(refusal(#"{"jsonrpc":"2.0","method":"eth_getBalance","params":[],"id":1}"#, methods))
        XCTAssertEqual(refusal(#"{"jsonrpc":"2.0","method":"eth_sendRawTransaction","id":1}"#, methods),
                       "JSON-RPC method eth_sendRawTransaction")
        XCTAssertNotNil(refusal(#"[{"method":"a"},{"method":"eth_sendRawTransaction"}]"#, methods))
    }

    /// Issue 59: a mutation whose body was not understood was cached by its
    /// bytes, so a second write never reached the upstream. Only a body
    /// read positively as queries is cached; every other kind is refused.
    func testOnlyBodiesReadAsQueriesAreCached() {
        let mutation = #"{"query":"mutation { like(id: 1) }"}"#
        let deep = String(repeating: #"{"a":"#, count: 70) + "1" + String(repeating: "}", count: 70)
        let notJSON = ["name=value&x=1", "mutation { like(id: 1) }", "\u{FEFF}" + mutation,
                       #"{"query":"mutation { a }","v":NaN}"#, #"{"query":"mutation { a }","v":Infinity}"#,
                       #"{"query":"mutation { a }","d":"# + deep + "}",
                       #"{"method":"send","params":"# + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}"]
        for body in notJSON { XCTAssertEqual(refusal(body, ["send"]), "not read as JSON", body) }
        XCTAssertNotNil(refusal(#"{"operationName":"Like","variables":{},"#
                                + #""extensions":{"persistedQuery":{"version":1,"sha256Hash":"abc"}}}"#),
                        "a hash says nothing of what it names")
        XCTAssertNil(JSONQuery.refusal(Array(#"{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"abc"}}}"#.utf8),
                                       uncachedMethods: [], persistedQueries: true), "unless the route allows them")
        XCTAssertNotNil(JSONQuery.refusal(Array(#"{"extensions":{"other":1}}"#.utf8), uncachedMethods: [], persistedQueries: true),
                        "extensions that name no persisted query are no query")
        XCTAssertNotNil(JSONQuery.refusal(Array(#"{"query":"mutation { a }","extensions":{}}"#.utf8),
                                          uncachedMethods: [], persistedQueries: true), "a readable write is still a write")
        for other in [#"{"search":"shoes"}"#, "[]", "[1]", #""{ a }""#, "{}", #"{"query":1}"#, #"{"method":null}"#] {
            XCTAssertNotNil(refusal(other), other)
        }
        for document in ["Mutation { a }", "{ a", "{ a } }", "query Q", "type Query { a: Int }", "\"\"\"doc\"\"\" query { a }",
                         "query { a(x: \"open) }", "fragment F on T { a }", "query { a ] }", "query { a } %", "",
                         "extend type Q { a: Int }"] {
            XCTAssertNotNil(GraphQLDocument.refusal(Array(document.utf8)), document)
        }
        for document in ["{ a }", "\u{FEFF} query { a }", "# c\nquery A { a },, query B { b }", "{ a(x: [1, {y: \"}\"}]) }"] {
            XCTAssertNil(GraphQLDocument.refusal(Array(document.utf8)), document)
        }
    }
}
