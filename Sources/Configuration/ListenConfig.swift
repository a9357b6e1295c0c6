import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import HTTP3
import TLS
import TOMLKit

/// One socket clients connect to: `listen = "HOST:PORT"` (one plain
/// listener), or each `[[listen]]` table, plain or TLS.
public struct ListenerConfig: Equatable {
    public var host: String
    public var port: UInt16
    public var tls: TLSListenerConfig?
    /// HTTP/2: by ALPN (h2) on a TLS listener, by prior knowledge (h2c) on a plain one.
    public var http2 = true
    /// HTTP/3 (QUIC on UDP, the same port and certificates) beside a TLS listener.
    public var http3 = false

    public init(host: String, port: UInt16, tls: TLSListenerConfig? = nil, http2: Bool = true, http3: Bool = false) {
        (self.host, self.port, self.tls, self.http2, self.http3) = (host, port, tls, http2, http3)
    }

    /// HOST:PORT as the log and check-config show it.
    public var shown: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }
}

/// A TLS listener's certificates: the first is the default, the others are
/// chosen by the name the client asks for (SNI).
public struct TLSListenerConfig: Equatable {
    public var certificates: [TLSCertificate]
    /// Refuse a handshake whose name (or its absence) matches no certificate.
    public var strictSNI = false

    public init(certificates: [TLSCertificate], strictSNI: Bool = false) {
        (self.certificates, self.strictSNI) = (certificates, strictSNI)
    }
}

extension ListenerConfig {
    public static let keys = ["address", "tls", "http2", "http3", "certificate", "key", "ocsp", "strict_sni", "certificates"]
    public static let certificateKeys = ["certificate", "key", "ocsp"]

    /// `[[listen]]` tables; `fail(index, key, message)` makes the error for a key.
    public static func parse(_ value: TOMLValueConvertible,
                      fail: (Int, String, String) -> ConfigError) throws(ConfigError) -> [ListenerConfig] {
        guard value.type == .array, let array = value.array, array.count > 0 else {
            throw fail(0, "", "expected listen = \"HOST:PORT\" or [[listen]] tables with an address")
        }
        var listeners: [ListenerConfig] = []
        for index in 0..<array.count {
            guard let table = array[index].table else {
                throw fail(index, "", "expected listen = \"HOST:PORT\" or [[listen]] tables with an address")
            }
            for key in table.keys where !keys.contains(key) {
                throw fail(index, key, UnknownKey.message("listen key", key, known: keys))
            }
            guard let address = table["address"]?.string, let hp = Units.parseHostPort(address) else {
                throw fail(index, "address", "every [[listen]] needs address = \"HOST:PORT\", e.g. \"0.0.0.0:8443\"")
            }
            var listener = ListenerConfig(host: hp.host, port: hp.port)
            if let item = table["http2"] {
                guard let flag = item.bool else { throw fail(index, "http2", "expected true or false") }
                listener.http2 = flag
            }
            if let item = table["http3"] {
                guard let flag = item.bool else { throw fail(index, "http3", "expected true or false") }
                listener.http3 = flag
            }
            let tls: Bool
            if let item = table["tls"] {
                guard let flag = item.bool else { throw fail(index, "tls", "expected true or false") }
                tls = flag
            } else {
                tls = false
            }
            let tlsKeys = ["certificate", "key", "ocsp", "strict_sni", "certificates"].filter { table[$0] != nil }
            guard tls else {
                if let key = tlsKeys.first { throw fail(index, key, "only a TLS listener has it: add tls = true") }
                if listener.http3 {
                    throw fail(index, "http3", "HTTP/3 runs over QUIC, which is always TLS: add tls = true with certificate and key")
                }
                listeners.append(listener)
                continue
            }
            var certificates: [TLSCertificate] = []
            guard table["certificate"] != nil || table["key"] != nil else {
                throw fail(index, "certificate", "a TLS listener needs certificate = \"PEM chain\" and key = \"PEM key\" files")
            }
            certificates.append(try certificate(table, fail: { fail(index, $0, $1) }))
            if let item = table["certificates"] {
                guard item.type == .array, let more = item.array else {
                    throw fail(index, "certificates", "expected [[listen.certificates]] tables with certificate and key")
                }
                for n in 0..<more.count {
                    guard let entry = more[n].table else {
                        throw fail(index, "certificates", "expected [[listen.certificates]] tables with certificate and key")
                    }
                    for key in entry.keys where !certificateKeys.contains(key) {
                        throw fail(index, "certificates.\(key)", UnknownKey.message("key", key, known: certificateKeys))
                    }
                    certificates.append(try certificate(entry, fail: { fail(index, "certificates.\($0)", $1) }))
                }
            }
            var config = TLSListenerConfig(certificates: certificates)
            if let item = table["strict_sni"] {
                guard let flag = item.bool else { throw fail(index, "strict_sni", "expected true or false") }
                config.strictSNI = flag
            }
            listener.tls = config
            listeners.append(listener)
        }
        return listeners
    }

    private static func certificate(_ table: TOMLTable, fail: (String, String) -> ConfigError) throws(ConfigError) -> TLSCertificate {
        var paths: [String: String] = [:]
        for key in certificateKeys {
            guard let item = table[key] else { continue }
            guard let path = item.string, !path.isEmpty else { throw fail(key, "expected a file path string") }
            paths[key] = path
        }
        guard let chain = paths["certificate"] else { throw fail("certificate", "expected the certificate's PEM file (its chain, leaf first)") }
        guard let key = paths["key"] else { throw fail("key", "expected the PEM file of the certificate's private key") }
        return TLSCertificate(chain: chain, key: key, ocsp: paths["ocsp"])
    }

    /// Loads this listener's certificates (nil for a plain listener); the
    /// error names the listener and the file.
    public func loadTLS() throws(TLSError) -> TLSContext? {
        guard let tls else { return nil }
        do {
            return try TLSContext(certificates: tls.certificates, strictSNI: tls.strictSNI,
                                  alpn: http2 ? ["h2", "http/1.1"] : ["http/1.1"])
        } catch {
            throw TLSError("TLS listener \(shown): \(error)")
        }
    }

    /// This listener's certificates for QUIC (GnuTLS: QUIC's TLS), nil
    /// unless it serves HTTP/3; `secret`: the running set's, kept across a
    /// reload. The error names the listener and the file.
    public func loadQUIC(secret: [UInt8]? = nil) throws(TLSError) -> QUICCredentials? {
        guard http3, let tls else { return nil }
        do {
            return try QUICCredentials(certificates: tls.certificates.map { ($0.chain, $0.key) }, secret: secret)
        } catch {
            throw TLSError("HTTP/3 on \(shown): \(error)")
        }
    }

    /// Warnings for certificates that are not valid at `now` (seconds since
    /// 1970): expired, or not valid yet (a clock behind, or a certificate
    /// made for later). Clients refuse them; serve still starts with them.
    public static func validityWarnings(_ context: TLSContext, chains: [String], now: Int64) -> [String] {
        zip(chains, context.validity).compactMap { chain, validity in
            guard let (notBefore, notAfter) = validity else { return nil }
            if now > notAfter {
                return "TLS certificate \(chain) expired on \(Self.utc(notAfter)) (notAfter): clients refuse it; renew it"
            }
            if now < notBefore {
                return "TLS certificate \(chain) is not valid before \(Self.utc(notBefore)) (notBefore): clients refuse it "
                    + "until then; check the system clock or the certificate"
            }
            return nil
        }
    }

    public func validityWarnings(_ context: TLSContext) -> [String] {
        Self.validityWarnings(context, chains: tls?.certificates.map(\.chain) ?? [], now: Int64(time(nil)))
    }

    private static func utc(_ seconds: Int64) -> String {
        var t = time_t(seconds), parts = tm()
        gmtime_r(&t, &parts)
        var text = [CChar](repeating: 0, count: 32)
        _ = strftime(&text, text.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
        return String(cString: text)
    }

    /// Warnings for private keys that users other than the service's owner
    /// and group may read (mode wider than 0640), as ssh warns.
    public func keyWarnings() -> [String] {
        (tls?.certificates ?? []).compactMap { certificate in
            var info = stat()
            guard stat(certificate.key, &info) == 0, info.st_mode & 0o037 != 0 else { return nil }
            return "TLS key \(certificate.key) is readable by others (mode \(String(info.st_mode & 0o777, radix: 8))); "
                + "chmod 640 it (owner root, group of the service) or pass it as a systemd credential"
        }
    }
}
