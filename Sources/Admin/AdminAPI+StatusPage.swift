import HTTPHeaders

/// `GET /`: the status page. A browser signs in once with `/?token=TOKEN`:
/// it gets a cookie (HttpOnly, SameSite=Strict) holding this process's
/// random session value, never the token, and the address loses the token
/// at once (303 to `/`), so it stays out of history and screenshots. The
/// cookie is honoured for reads only (`handle`).
extension AdminAPI {
    static let cookieName = "larder_admin"

    func statusPage(_ query: [(name: String, value: String)], authorization: String?, cookie: String?) -> Response {
        if let given = query.last(where: { $0.name == "token" })?.value {
            guard let token, isToken(Array(given.utf8), readOnly: false, admin: token) || isToken(Array(given.utf8), readOnly: true, admin: token) else {
                return Self.page(401, "Wrong admin token", "That token is not this Larder's admin token (admin_token_file) or read token.")
            }
            var response = Response(status: 303, contentType: "text/plain; charset=utf-8", body: "signed in; see /\n")
            response.extraHeaders = [
                "location": "/",
                "set-cookie": "\(Self.cookieName)=\(String(decoding: statusSession, as: UTF8.self)); Path=/; HttpOnly; SameSite=Strict",
            ]
            return response
        }
        guard authorized(authorization) || authorized(authorization, readOnly: true) || authorized(cookie: cookie) else {
            return Self.page(401, "Sign in", "Open this page as /?token=YOUR_ADMIN_TOKEN (the token in admin_token_file).")
        }
        var response = Response(status: 200, contentType: "text/html; charset=utf-8", body: StatusPage.html)
        response.extraHeaders = Self.pageFields
        return response
    }

    private static let pageFields: HeaderFields = [
        "content-security-policy": StatusPage.securityPolicy,
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
    ]

    /// A short page of text (sign-in problems).
    private static func page(_ status: Int, _ title: String, _ text: String) -> Response {
        var response = Response(status: status, contentType: "text/html; charset=utf-8", body: """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Larder: \(title)</title>\
            <link rel="icon" href="data:,"></head><body><h1>\(title)</h1><p>\(text)</p></body></html>

            """)
        response.extraHeaders = pageFields
        return response
    }

    /// Whether the Cookie field holds the status page's cookie with this
    /// process's session value.
    func authorized(cookie: String?) -> Bool {
        guard token != nil else { return true }
        guard let cookie else { return false }
        for pair in cookie.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0].trimmingSpaces == Self.cookieName else { continue }
            if Self.constantTimeEqual(Array(parts[1].trimmingSpaces.utf8), statusSession) { return true }
        }
        return false
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return s
    }
}
