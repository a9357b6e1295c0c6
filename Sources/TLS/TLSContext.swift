import CTLS

/// One certificate a TLS listener presents: a PEM chain (leaf first), its
/// PEM key, and optionally a DER OCSP response to staple.
public struct TLSCertificate: Equatable, Sendable {
    public var chain: String
    public var key: String
    public var ocsp: String?

    public init(chain: String, key: String, ocsp: String? = nil) {
        self.chain = chain
        self.key = key
        self.ocsp = ocsp
    }
}

/// What is wrong with a listener's certificates, or with OpenSSL.
public struct TLSError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The certificates of one listener, loaded: the first is the default,
/// the others chosen by SNI. Each connection holds the context it began
/// with, so a reload (a new context) never pulls one from under a
/// handshake. Immutable; any thread.
public final class TLSContext: @unchecked Sendable {
    let pointer: OpaquePointer
    /// The names each certificate answers to, in order (for the log).
    public let names: [String]

    /// `alpn`: the protocols offered, in order of preference.
    public init(certificates: [TLSCertificate], strictSNI: Bool = false, alpn: [String] = ["http/1.1"]) throws(TLSError) {
        guard !certificates.isEmpty else { throw TLSError("no certificate") }
        var wire: [UInt8] = []
        for name in alpn { wire.append(UInt8(name.utf8.count)); wire += name.utf8 }
        var error = [CChar](repeating: 0, count: 512)
        // C strings that live across the call: strdup'd and freed after.
        var strings: [UnsafeMutablePointer<CChar>?] = []
        defer { strings.forEach { free($0) } }
        func c(_ text: String?) -> UnsafePointer<CChar>? {
            guard let text else { return nil }
            let copy = strdup(text)
            strings.append(copy)
            return UnsafePointer(copy)
        }
        let list = certificates.map { larder_tls_certificate(chain: c($0.chain), key: c($0.key), ocsp: c($0.ocsp)) }
        guard let made = list.withUnsafeBufferPointer({ certs in
            wire.withUnsafeBufferPointer { alpnBytes in
                larder_tls_context_new(certs.baseAddress, Int32(certs.count), strictSNI ? 1 : 0, alpnBytes.baseAddress,
                                       UInt32(alpnBytes.count), &error, error.count)
            }
        }) else {
            throw TLSError(String(cString: error))
        }
        pointer = made
        names = (0..<certificates.count).map { String(cString: larder_tls_context_names(made, Int32($0))) }
    }

    deinit { larder_tls_context_free(pointer) }

    /// Each certificate's validity (notBefore, notAfter; seconds since
    /// 1970), in order; nil where OpenSSL could not say.
    public var validity: [(notBefore: Int64, notAfter: Int64)?] {
        names.indices.map { index in
            var before: Int64 = 0, after: Int64 = 0
            return larder_tls_context_validity(pointer, Int32(index), &before, &after) == 0 ? (before, after) : nil
        }
    }

    /// Loads OpenSSL (once); throws when it cannot be.
    public static func loadLibrary() throws(TLSError) {
        guard larder_tls_load() == 0 else { throw TLSError(String(cString: larder_tls_error())) }
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// Strong digests, from the OpenSSL that TLS loads.
public enum Digest {
    /// SHA-256 of `bytes` as 64 lowercase hex digits; throws when OpenSSL
    /// cannot be loaded.
    public static func sha256Hex(_ bytes: UnsafeRawBufferPointer) throws(TLSError) -> String {
        var out = [UInt8](repeating: 0, count: 32)
        let done = out.withUnsafeMutableBufferPointer { larder_sha256(bytes.baseAddress, bytes.count, $0.baseAddress) }
        guard done == 0 else { throw TLSError(String(cString: larder_tls_error())) }
        let hex = Array("0123456789abcdef".utf8)
        return String(decoding: out.flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 15)]] }, as: UTF8.self)
    }
}
