//! The authorization server's HTML: the login page, the consent page and the
//! error page. Plain, accessible markup (labels, landmarks, one heading, visible
//! focus) with inline CSS; no JavaScript. Every value is escaped.

const STYLE: &str = "\
*{box-sizing:border-box}\
body{margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center;\
font:16px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;background:#f3f4f6;color:#111827}\
main{background:#fff;width:100%;max-width:26rem;margin:1rem;padding:2rem;border-radius:12px;\
box-shadow:0 1px 3px rgba(0,0,0,.1),0 8px 24px rgba(0,0,0,.06)}\
h1{font-size:1.35rem;margin:0 0 .25rem}\
p{margin:.5rem 0;color:#374151}\
.who{font-size:.9rem;color:#4b5563;word-break:break-all}\
label{display:block;font-weight:600;margin:1rem 0 .25rem}\
input[type=text],input[type=password]{width:100%;padding:.6rem .7rem;font:inherit;border:1px solid #9ca3af;border-radius:8px}\
input:focus,button:focus{outline:3px solid #2563eb;outline-offset:2px}\
ul{padding-left:1.25rem}\
.actions{display:flex;gap:.75rem;margin-top:1.5rem}\
button{flex:1;padding:.65rem 1rem;font:inherit;font-weight:600;border-radius:8px;border:1px solid #1d4ed8;cursor:pointer}\
.primary{background:#1d4ed8;color:#fff}\
.secondary{background:#fff;color:#1d4ed8}\
.error{background:#fef2f2;color:#991b1b;border:1px solid #fecaca;border-radius:8px;padding:.5rem .75rem}\
dl{margin:1rem 0;font-size:.95rem}dt{color:#4b5563}dd{margin:0 0 .5rem;font-weight:600;word-break:break-all}\
.unverified{font-size:.8rem;font-weight:600;color:#92400e;background:#fffbeb;border:1px solid #fcd34d;\
border-radius:6px;padding:0 .35rem;white-space:nowrap}\
footer{margin-top:1.5rem;font-size:.8rem;color:#6b7280}";

/// What the pages say about the client asking.
pub(crate) struct Shown<'a> {
    /// Its name, or its id when it gave none.
    pub(crate) name: &'a str,
    /// Whether the operator named it (a configured client); any other name is the
    /// client's own claim, marked as such.
    pub(crate) verified: bool,
    /// Where the code is sent: the redirect URI's host (and port), or its scheme.
    pub(crate) destination: &'a str,
    /// The URL of its metadata document (a CIMD client).
    pub(crate) document: Option<&'a str>,
}

impl Shown<'_> {
    /// The name, marked when nobody verified it.
    fn name_html(&self) -> String {
        let mark = if self.verified {
            ""
        } else {
            " <span class=\"unverified\">name not verified</span>"
        };
        format!("<strong>{}</strong>{mark}", escape(self.name))
    }
}

/// Escapes text for HTML content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<meta name=\"referrer\" content=\"no-referrer\"><title>{}</title><style>{STYLE}</style></head>\
<body><main>{body}<footer>eragate authorization server</footer></main></body></html>",
        escape(title)
    )
}

fn hidden(txn: &str, csrf: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"txn\" value=\"{}\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        escape(txn),
        escape(csrf)
    )
}

/// The login page of a pending authorization.
pub(crate) fn login(action: &str, txn: &str, csrf: &str, client: &Shown<'_>, error: Option<&str>) -> String {
    let error = error
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(e)))
        .unwrap_or_default();
    let body = format!(
        "<h1>Sign in</h1><p class=\"who\">to continue to {}</p>{error}\
<form method=\"post\" action=\"{}\">{}\
<label for=\"username\">Username</label>\
<input type=\"text\" id=\"username\" name=\"username\" autocomplete=\"username\" required autofocus>\
<label for=\"password\">Password</label>\
<input type=\"password\" id=\"password\" name=\"password\" autocomplete=\"current-password\" required>\
<div class=\"actions\"><button type=\"submit\" class=\"primary\">Sign in</button></div></form>",
        client.name_html(),
        escape(action),
        hidden(txn, csrf)
    );
    page("Sign in", &body)
}

/// The consent page: `client` asks to act as `user` on `resource` with `scopes`;
/// it says where the code goes and, for a metadata document, who describes the client.
pub(crate) fn consent(
    action: &str,
    txn: &str,
    csrf: &str,
    client: &Shown<'_>,
    user: &str,
    resource: &str,
    scopes: &[String],
) -> String {
    let scopes = if scopes.is_empty() {
        "<p>No particular scopes: it may use the server as you.</p>".to_owned()
    } else {
        let items: String = scopes
            .iter()
            .map(|s| format!("<li><code>{}</code></li>", escape(s)))
            .collect();
        format!("<p>It asks for:</p><ul>{items}</ul>")
    };
    let document = client
        .document
        .map(|url| format!("<dt>Described by the document at</dt><dd>{}</dd>", escape(url)))
        .unwrap_or_default();
    let body = format!(
        "<h1>Allow access?</h1><p>{} wants to use <span class=\"who\">{}</span> as <strong>{}</strong>.</p>\
{scopes}<dl><dt>If you allow, you are sent back to</dt><dd>{}</dd>{document}</dl>\
<form method=\"post\" action=\"{}\">{}\
<div class=\"actions\"><button type=\"submit\" name=\"decision\" value=\"deny\" class=\"secondary\">Deny</button>\
<button type=\"submit\" name=\"decision\" value=\"allow\" class=\"primary\">Allow</button></div></form>",
        client.name_html(),
        escape(resource),
        escape(user),
        escape(client.destination),
        escape(action),
        hidden(txn, csrf)
    );
    page("Allow access?", &body)
}

/// An error the user sees (no redirect is safe: unknown client or redirect URI).
pub(crate) fn error(message: &str) -> String {
    let body = format!(
        "<h1>This sign-in cannot continue</h1><p class=\"error\" role=\"alert\">{}</p>\
<p>Return to the application and try again.</p>",
        escape(message)
    );
    page("Sign-in error", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped() {
        let cases = [
            ("<script>", "&lt;script&gt;"),
            ("a\"b'c&", "a&quot;b&#39;c&amp;"),
            ("plain", "plain"),
        ];
        for (text, escaped) in cases {
            assert_eq!(escape(text), escaped);
        }
        let shown = Shown {
            name: "<b>evil</b>",
            verified: false,
            destination: "<i>",
            document: Some("https://x/\"><script>"),
        };
        let html = login("/oauth/login", "t", "c", &shown, Some("x"));
        assert!(html.contains("&lt;b&gt;evil"), "{html}");
        assert!(!html.contains("<b>evil"));
        let html = consent("/oauth/consent", "t", "c", &shown, "u", "r", &[]);
        assert!(
            !html.contains("<b>evil") && !html.contains("<i>") && !html.contains("<script>"),
            "{html}"
        );
    }

    #[test]
    fn names_nobody_verified_are_marked() {
        let mut shown = Shown {
            name: "Official App",
            verified: false,
            destination: "app.example.com",
            document: None,
        };
        let html = consent("/oauth/consent", "t", "c", &shown, "u", "r", &[]);
        assert!(
            html.contains("name not verified") && html.contains("app.example.com"),
            "{html}"
        );
        assert!(!html.contains("Described by"), "{html}");
        shown.verified = true;
        shown.document = Some("https://app.example.com/client.json");
        let html = consent("/oauth/consent", "t", "c", &shown, "u", "r", &[]);
        assert!(!html.contains("name not verified"), "{html}");
        assert!(html.contains("https://app.example.com/client.json"), "{html}");
    }
}
