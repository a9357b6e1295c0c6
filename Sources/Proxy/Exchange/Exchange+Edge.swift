import EdgeControls
import HTTP1
import HTTPHeaders
import Telemetry

/// The edge controls around an exchange, in their documented order: the
/// access list and the rate limit before anything (`EdgeGate`), request
/// rules on what goes upstream, response rules on every head its client
/// is sent (`ResponseEdits`, applied by the sink; never stored).
extension Exchange {
    /// False when the request was answered here (403, 429). Otherwise the
    /// sink is given the response rules for this exchange's answer.
    func passesEdge(_ edge: EdgeRules) -> Bool {
        // (The loop is read unretained: a retain and a release on every request.)
        if edge.gates, let refusal = Unmanaged.passUnretained(loop)._withUnsafeGuaranteedRef({ loop in
            EdgeGate.refusal(edge, request: request, client: clientAddress, now: loop.wakeMicroseconds)
        }) {
            EdgeGate.count(refusal, in: upstream.counters)
            if edge.editsResponses { sink.setAnswerEdits(responseEdits(edge)) }
            if let wait = refusal.retryAfter {
                answer.tooManyRequests(retryAfter: wait, for: request)
                complete()
            } else {
                sendMadeHere(refusal.status, refusal.message)
            }
            return false
        }
        if edge.editsResponses { sink.setAnswerEdits(responseEdits(edge)) }
        return true
    }

    /// The client's address as the rules see it.
    var clientAddress: IPAddress {
        EdgeGate.client(of: request, socket: sink.peerAddress, trusted: upstream.configuration.trustedProxies)
    }

    /// What the rules' variables stand for in this request.
    func ruleValues(_ edge: EdgeRules) -> RequestValues {
        var id = ""
        if edge.usesRequestID {
            if rendered == nil { rendered = RenderedFields() }
            if rendered!.requestID == nil { rendered!.requestID = RequestID.next() }
            id = rendered!.requestID!
        }
        return RequestValues(host: Self.hostName(request.header("host")), clientAddress: clientAddress.description, requestID: id)
    }

    /// `$host`: the Host field's name, lowercased, without its port.
    static func hostName(_ host: String?) -> String {
        guard let host else { return "" }
        let name = host.hasPrefix("[") ? String(host.prefix { $0 != "]" }) + "]" : String(host.prefix { $0 != ":" })
        return name.lowercased()
    }

    func responseEdits(_ edge: EdgeRules) -> ResponseEdits {
        guard edge.responseLiteralFields == nil else { return ResponseEdits(rules: edge, rendered: nil) }
        let fields = edge.responseHeaders.fields(ruleValues(edge))
        if rendered == nil { rendered = RenderedFields() }
        rendered!.fields = fields
        return ResponseEdits(rules: edge, rendered: rendered)
    }

    /// Request rules (and `strip_cookies`) on the fields going upstream.
    func applyRequestRules(_ edge: EdgeRules, to fields: inout HeaderFields) {
        EdgeGate.applyRequestRules(edge, to: &fields, ruleValues(edge))
    }
}
