/// An ordered list of header fields, repeats allowed, in the shape of
/// swift-http-types' `HTTPFields` (a collection of fields with look-ups by
/// name). That package's type was measured and not adopted: building a
/// request's six fields and looking up four costs about 12,300
/// instructions with it against 4,400 with this (bench/field-types/run.sh),
/// half of a whole memory hit more. This one is a thin wrapper over an array.
public struct HeaderFields: Equatable, Hashable, Sendable {
    public var fields: [HeaderField]

    @inlinable
    public init(_ fields: [HeaderField]) { self.fields = fields }

    /// The first value of the field `name` (lowercase), or nil.
    @inlinable
    public subscript(name: String) -> String? {
        for field in fields where field.name.isField(name) { return field.value }
        return nil
    }

    /// Every value of `name`, in order.
    @inlinable
    public func values(_ name: String) -> [String] {
        var result: [String] = []
        for field in fields where field.name.isField(name) { result.append(field.value) }
        return result
    }

    /// All values of `name` comma-joined, as RFC 9110 section 5.3 allows
    /// for list fields; nil when there is none. The usual single field is
    /// returned without building anything.
    @inlinable
    public func combined(_ name: String) -> String? {
        var result: String?
        for field in fields where field.name.isField(name) {
            if result == nil { result = field.value } else { result! += ", " + field.value }
        }
        return result
    }

    @inlinable
    public func contains(_ name: String) -> Bool {
        fields.contains { $0.name.isField(name) }
    }

    @inlinable
    public mutating func append(_ name: String, _ value: String) {
        fields.append(HeaderField(lowercasedName: name, value: value))
    }

    /// Removes every field named `name`.
    @inlinable
    public mutating func remove(_ name: String) {
        fields.removeAll { $0.name.isField(name) }
    }
}

extension HeaderFields: RandomAccessCollection, MutableCollection, RangeReplaceableCollection {
    public typealias Index = Int

    @inlinable public init() { fields = [] }
    @inlinable public var startIndex: Int { fields.startIndex }
    @inlinable public var endIndex: Int { fields.endIndex }
    @inlinable public subscript(position: Int) -> HeaderField {
        get { fields[position] }
        set { fields[position] = newValue }
    }
    @inlinable public mutating func replaceSubrange<C: Collection>(_ range: Range<Int>, with new: C)
    where C.Element == HeaderField {
        fields.replaceSubrange(range, with: new)
    }
    @inlinable public mutating func reserveCapacity(_ n: Int) { fields.reserveCapacity(n) }
    @inlinable public mutating func append(_ field: HeaderField) { fields.append(field) }
    @inlinable public mutating func removeAll(keepingCapacity keep: Bool) {
        fields.removeAll(keepingCapacity: keep)
    }
}

extension HeaderFields: ExpressibleByDictionaryLiteral {
    /// `["cache-control": "max-age=60", "vary": "accept"]`: names lowercased,
    /// order kept, repeats allowed (a literal builds a list, not a dictionary).
    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { HeaderField(name: $0.0, value: $0.1) }
    }
}

extension HeaderFields: ExpressibleByArrayLiteral {
    @inlinable
    public init(arrayLiteral elements: HeaderField...) { fields = elements }
}

extension HeaderFields: CustomStringConvertible {
    public var description: String {
        fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }
}
