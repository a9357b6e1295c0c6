/// Sums and differences of times and ages that came from outside (a disk
/// file, a Redis record, a header): saturating, never an overflow trap, so
/// one hostile value cannot end the process. Records are also bounded
/// where they are decoded; this is the second line.
extension FixedWidthInteger where Self: SignedInteger {
    /// `self - other`, held at `.min` / `.max` instead of overflowing.
    @inlinable public func minusSaturating(_ other: Self) -> Self {
        let (result, overflow) = subtractingReportingOverflow(other)
        return overflow ? (other < 0 ? .max : .min) : result
    }

    /// `self + other`, held at `.min` / `.max` instead of overflowing.
    @inlinable public func plusSaturating(_ other: Self) -> Self {
        let (result, overflow) = addingReportingOverflow(other)
        return overflow ? (other < 0 ? .min : .max) : result
    }
}
