//! fauxpay's stand-in for the card issuer's 3-D Secure page: plain server-rendered HTML,
//! no scripts and no external assets, every value from a request or an object escaped.
//! Its two buttons post `outcome=succeed` or `outcome=fail` (with `redirect=true`) to the
//! intent's authenticate endpoint, which then sends the customer back to the
//! `return_url` or, without one, answers [`result`].

use std::fmt::Write;

/// What the page shows of an intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// `Payment` or `Setup`: what the customer authenticates.
    pub what: &'static str,
    pub id: String,
    pub status: &'static str,
    /// Whether the intent waits for this authentication (`requires_action`): the
    /// buttons are shown only then.
    pub awaiting: bool,
    /// The amount in the currency's smallest unit, and the currency (payments).
    pub amount: Option<(u64, &'static str)>,
    /// The card's brand and last four digits.
    pub card: Option<(&'static str, &'static str)>,
    pub description: Option<String>,
    pub metadata: Vec<(String, String)>,
    pub return_url: Option<String>,
    /// Where the buttons post (`/__fauxpay/payment_intents/{id}/authenticate`, …).
    pub action: String,
}

/// `s` with HTML's special characters escaped (for text and for quoted attributes).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
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

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color:#222}\
h1{font-size:1.3rem}dl{display:grid;grid-template-columns:max-content auto;gap:.3rem 1rem}\
dt{color:#666}dd{margin:0;overflow-wrap:anywhere}form{display:inline}\
button{font-size:1rem;padding:.6rem 1.2rem;margin:1rem .6rem 0 0;cursor:pointer}\
.ok{background:#1a7f37;color:#fff;border:0}.fail{background:#fff;color:#b42318;border:1px solid #b42318}\
.note{color:#666;font-size:.9rem}";

fn document(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{STYLE}</style></head><body>\n{body}</body></html>\n",
        escape(title)
    )
}

fn row(out: &mut String, name: &str, value: &str) {
    let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", escape(name), escape(value));
}

/// The page of an intent.
pub fn render(page: &Page) -> String {
    let mut body = format!(
        "<h1>fauxpay test authentication</h1>\n<p>A stand-in for the card issuer's 3-D Secure page. {} <code>{}</code>.</p>\n<dl>\n",
        escape(page.what),
        escape(&page.id)
    );
    if let Some((amount, currency)) = page.amount {
        row(
            &mut body,
            "Amount",
            &format!("{amount} {currency} (smallest currency unit)"),
        );
    }
    if let Some((brand, last4)) = page.card {
        row(&mut body, "Card", &format!("{brand} •••• {last4}"));
    }
    row(&mut body, "Status", page.status);
    if let Some(d) = &page.description {
        row(&mut body, "Description", d);
    }
    for (k, v) in &page.metadata {
        row(&mut body, &format!("metadata[{k}]"), v);
    }
    if let Some(url) = &page.return_url {
        row(&mut body, "Returns to", url);
    }
    body.push_str("</dl>\n");
    if page.awaiting {
        let action = escape(&page.action);
        for (outcome, class, label) in [
            ("succeed", "ok", "Complete authentication"),
            ("fail", "fail", "Fail authentication"),
        ] {
            let _ = writeln!(
                body,
                "<form method=\"post\" action=\"{action}\"><input type=\"hidden\" name=\"outcome\" value=\"{outcome}\"><input type=\"hidden\" name=\"redirect\" value=\"true\"><button type=\"submit\" class=\"{class}\">{label}</button></form>"
            );
        }
        body.push_str(
            "<p class=\"note\">Scripts can do the same: <code>POST</code> to the form's URL with <code>outcome=succeed</code> or <code>outcome=fail</code>.</p>\n",
        );
    } else {
        let _ = writeln!(
            body,
            "<p>This {} is not awaiting authentication (its status is {}).</p>",
            escape(&page.what.to_lowercase()),
            escape(page.status)
        );
    }
    document("fauxpay test authentication", &body)
}

/// What the customer sees after the buttons when there is no `return_url` to go back
/// to (or the authentication could not be recorded): `message`, about `id`.
pub fn result(id: &str, message: &str) -> String {
    document(
        "fauxpay test authentication",
        &format!(
            "<h1>fauxpay test authentication</h1>\n<p><code>{}</code>: {}</p>\n<p class=\"note\">You can close this window.</p>\n",
            escape(id),
            escape(message)
        ),
    )
}

/// The page of an id that names no intent.
pub fn not_found(id: &str) -> String {
    document(
        "Not found",
        &format!(
            "<h1>Not found</h1>\n<p>No payment intent or setup intent <code>{}</code>.</p>\n",
            escape(id)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Page {
        Page {
            what: "Payment",
            id: "pi_1".into(),
            status: "requires_action",
            awaiting: true,
            amount: Some((2000, "usd")),
            card: Some(("visa", "3184")),
            description: Some("tea & cake".into()),
            metadata: vec![("order_id".into(), "<script>alert(1)</script>".into())],
            return_url: Some("https://shop.example/back?a=1&b=\"><img src=x onerror=alert(1)>".into()),
            action: "/__fauxpay/payment_intents/pi_1/authenticate".into(),
        }
    }

    #[test]
    fn the_page_escapes_everything_it_shows() {
        let html = render(&page());
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("a=1&amp;b=&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"));
        assert!(html.contains("tea &amp; cake"));
        assert!(html.contains("2000 usd"));
        assert!(html.contains("visa •••• 3184"));
        assert_eq!(html.matches("<form method=\"post\"").count(), 2);
        assert!(html.contains("name=\"outcome\" value=\"succeed\""));
        assert!(html.contains("name=\"outcome\" value=\"fail\""));
        assert!(html.contains("action=\"/__fauxpay/payment_intents/pi_1/authenticate\""));
        assert!(
            !html.contains("<script") && !html.contains("src=\"http"),
            "no scripts, no assets"
        );
        assert!(!html.contains("onerror=alert(1)>"), "{html}");
    }

    #[test]
    fn no_buttons_unless_awaiting() {
        let html = render(&Page {
            awaiting: false,
            status: "succeeded",
            ..page()
        });
        assert!(!html.contains("<form"));
        assert!(html.contains("not awaiting authentication (its status is succeeded)"));
    }

    #[test]
    fn results_and_unknown_ids_are_escaped_too() {
        assert!(result("pi_<b>", "done & dusted").contains("pi_&lt;b&gt;</code>: done &amp; dusted"));
        let html = not_found("<svg onload=x>");
        assert!(html.contains("&lt;svg onload=x&gt;") && !html.contains("<svg"));
    }
}
