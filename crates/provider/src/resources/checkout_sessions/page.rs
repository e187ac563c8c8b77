//! fauxpay's hosted Checkout page: plain server-rendered HTML (maud, which escapes every
//! value), no scripts and no external assets, in the 3-D Secure page's style. An open
//! session shows its line items, the total, an email field, a card field with the test
//! cards listed, *Pay* and a cancel link; *Pay* posts to the session's pay endpoint
//! (`redirect=true`). A paid or expired session shows that it is.

use maud::html;

use super::object::{CheckoutSession, SessionMode, SessionStatus};
use crate::resources::three_ds::page::document;

/// The test cards the page lists: number, what it does.
pub const TEST_CARDS: &[(&str, &str)] = &[
    ("4242 4242 4242 4242", "succeeds"),
    ("4000 0027 6000 3184", "asks for 3-D Secure"),
    ("4000 0000 0000 0002", "is declined (generic decline)"),
    ("4000 0000 0000 9995", "is declined (insufficient funds)"),
];

const TITLE: &str = "fauxpay test checkout";

/// `amount` (smallest unit) in `currency`, as a customer reads it: `19.99 USD`, `500 JPY`.
pub fn money(amount: u64, currency: &str) -> String {
    crate::stripe::money::display(amount, currency).to_ascii_uppercase()
}

/// The page of a session; `error` is what the last pay was refused with (a decline).
pub fn render(s: &CheckoutSession, error: Option<&str>) -> String {
    let currency = s.currency.map_or("usd", |c| c.code());
    let pay = format!("/__fauxpay/checkout/sessions/{}/pay", s.id);
    let fixed_email = s.customer_email.as_deref();
    let body = html! {
        h1 { (TITLE) }
        p { "A stand-in for Stripe's hosted Checkout page. Session " code { (s.id.as_str()) } "." }
        @match s.status {
            SessionStatus::Complete => {
                p.paid { "This session is already paid." }
                @if let Some(url) = s.success_url() { p { a href=(url) { "Back to the shop" } } }
            }
            SessionStatus::Expired => {
                p.expired { "This session has expired: it can no longer be paid." }
                @if let Some(url) = &s.cancel_url { p { a href=(url) { "Back to the shop" } } }
            }
            SessionStatus::Open => {
                @if s.mode == SessionMode::Payment {
                    table {
                        @for item in s.line_items.iter() {
                            tr {
                                td { (item.description) }
                                td { "× " (item.quantity) }
                                td.amount { (money(item.amount(), currency)) }
                            }
                        }
                        tr.total { td { "Total" } td {} td.amount { (money(s.amount_total(), currency)) } }
                    }
                } @else {
                    p { "Save a card for later payments." }
                }
                @if let Some(e) = error { p.error role="alert" { (e) } }
                form method="post" action=(pay) {
                    input type="hidden" name="redirect" value="true";
                    p {
                        label for="email" { "Email" } br;
                        @if let Some(email) = fixed_email {
                            input id="email" type="email" name="email" value=(email) readonly;
                        } @else {
                            input id="email" type="email" name="email" autocomplete="email" required[s.customer.is_none()];
                        }
                    }
                    p {
                        label for="card" { "Card number" } br;
                        input id="card" type="text" name="payment_method" inputmode="numeric" autocomplete="off" required placeholder="4242 4242 4242 4242";
                    }
                    button type="submit" class="ok" id="pay" {
                        @if s.mode == SessionMode::Payment { "Pay " (money(s.amount_total(), currency)) } @else { "Save card" }
                    }
                }
                @if let Some(url) = &s.cancel_url { p { a href=(url) id="cancel" { "Cancel and return to the shop" } } }
                p.note { "Test cards:" }
                ul.note {
                    @for (number, what) in TEST_CARDS { li { code { (number) } " " (what) } }
                }
                p.note {
                    "Scripts can do the same: " code { "POST " (pay) } " with "
                    code { "payment_method=pm_card_visa" } " and " code { "email" } "."
                }
            }
        }
    };
    document(TITLE, body)
}

/// The page of an id that names no session.
pub fn not_found(id: &str) -> String {
    document(
        "Not found",
        html! {
            h1 { "Not found" }
            p { "No Checkout Session " code { (id) } "." }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_reads_as_a_customer_reads_it() {
        assert_eq!(money(1999, "usd"), "19.99 USD");
        assert_eq!(money(5, "eur"), "0.05 EUR");
        assert_eq!(money(500, "jpy"), "500 JPY");
        assert_eq!(money(17500, "huf"), "175.00 HUF", "two decimals at Stripe");
    }
}
