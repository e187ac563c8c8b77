//! fauxpay's stand-in for the card issuer's 3-D Secure page: plain server-rendered HTML
//! (maud, which escapes every value from a request or an object), no scripts and no
//! external assets. Its two buttons post `outcome=succeed` or `outcome=fail` (with
//! `redirect=true`) to the intent's authenticate endpoint, which then sends the customer
//! back to the `return_url` or, without one, answers [`result`].

use maud::{html, Markup, DOCTYPE};

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
    /// Shown in a frame (the Stripe.js stand-in's modal, `?frame=1`): the buttons do not
    /// send the frame on to the `return_url` (the script follows the intent and leaves
    /// the frame itself), so the merchant's page is not loaded twice.
    pub in_frame: bool,
}

pub(crate) const STYLE: &str =
    "body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color:#222}\
h1{font-size:1.3rem}dl{display:grid;grid-template-columns:max-content auto;gap:.3rem 1rem}\
dt{color:#666}dd{margin:0;overflow-wrap:anywhere}form{display:inline}\
button{font-size:1rem;padding:.6rem 1.2rem;margin:1rem .6rem 0 0;cursor:pointer}\
.ok{background:#1a7f37;color:#fff;border:0}.fail{background:#fff;color:#b42318;border:1px solid #b42318}\
.note{color:#666;font-size:.9rem}\
table{border-collapse:collapse;margin:1rem 0}td{padding:.3rem 1rem .3rem 0}td.amount{text-align:right}\
tr.total td{border-top:1px solid #ccc;font-weight:600}label{color:#444}\
input{font-size:1rem;padding:.45rem;width:100%;max-width:20rem;box-sizing:border-box}\
.error{color:#b42318;font-weight:600}.paid{color:#1a7f37;font-weight:600}.expired{color:#b42318}";

const TITLE: &str = "fauxpay test authentication";

pub(crate) fn document(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (maud::PreEscaped(STYLE)) }
            }
            body { (body) }
        }
    }
    .into_string()
}

/// The page of an intent.
pub fn render(page: &Page) -> String {
    let mut rows: Vec<(String, String)> = Vec::new();
    if let Some((amount, currency)) = page.amount {
        rows.push(("Amount".into(), format!("{amount} {currency} (smallest currency unit)")));
    }
    if let Some((brand, last4)) = page.card {
        rows.push(("Card".into(), format!("{brand} •••• {last4}")));
    }
    rows.push(("Status".into(), page.status.into()));
    if let Some(d) = &page.description {
        rows.push(("Description".into(), d.clone()));
    }
    for (k, v) in &page.metadata {
        rows.push((format!("metadata[{k}]"), v.clone()));
    }
    if let Some(url) = &page.return_url {
        rows.push(("Returns to".into(), url.clone()));
    }
    let body = html! {
        h1 { (TITLE) }
        p { "A stand-in for the card issuer's 3-D Secure page. " (page.what) " " code { (page.id) } "." }
        dl {
            @for (name, value) in &rows {
                dt { (name) } dd { (value) }
            }
        }
        @if page.awaiting {
            @for (outcome, class, label) in [("succeed", "ok", "Complete authentication"), ("fail", "fail", "Fail authentication")] {
                form method="post" action=(page.action) {
                    input type="hidden" name="outcome" value=(outcome);
                    input type="hidden" name="redirect" value=(if page.in_frame { "false" } else { "true" });
                    button type="submit" class=(class) { (label) }
                }
            }
            p.note {
                "Scripts can do the same: " code { "POST" } " to the form's URL with "
                code { "outcome=succeed" } " or " code { "outcome=fail" } "."
            }
        } @else {
            p { "This " (page.what.to_lowercase()) " is not awaiting authentication (its status is " (page.status) ")." }
        }
    };
    document(TITLE, body)
}

/// What the customer sees after the buttons when there is no `return_url` to go back
/// to (or the authentication could not be recorded): `message`, about `id`.
pub fn result(id: &str, message: &str) -> String {
    document(
        TITLE,
        html! {
            h1 { (TITLE) }
            p { code { (id) } ": " (message) }
            p.note { "You can close this window." }
        },
    )
}

/// The page of an id that names no intent.
pub fn not_found(id: &str) -> String {
    document(
        "Not found",
        html! {
            h1 { "Not found" }
            p { "No payment intent or setup intent " code { (id) } "." }
        },
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
            in_frame: false,
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
    fn in_a_frame_the_buttons_do_not_redirect() {
        let html = render(&Page {
            in_frame: true,
            ..page()
        });
        assert_eq!(html.matches("name=\"redirect\" value=\"false\"").count(), 2, "{html}");
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
