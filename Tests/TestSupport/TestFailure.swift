/// An error a test helper throws when what it was given is not what the
/// test meant (a request that does not parse): the test fails, naming it,
/// rather than being skipped.
public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
