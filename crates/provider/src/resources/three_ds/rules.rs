//! What the 3-D Secure page shows of an intent, and where it sends the customer once the
//! authentication is recorded: the `return_url` the intent was confirmed with, with
//! Stripe's query parameters (`payment_intent`, `payment_intent_client_secret`,
//! `redirect_status`, or their `setup_intent` counterparts).

use super::page::Page;
use crate::resources::payment_intents::object::IntentStatus;
use crate::resources::setup_intents::object::SetupStatus;
use crate::state::payments::Payments;
use crate::stripe::ids::{PaymentIntentId, SetupIntentId};

/// `url` with `query` appended (after `?`, or `&` when it has a query already; before
/// any `#fragment`).
fn with_query(url: &str, query: &[(&str, &str)]) -> String {
    let (base, fragment) = match url.find('#') {
        Some(i) => url.split_at(i),
        None => (url, ""),
    };
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (k, v) in query {
        out.append_pair(k, v);
    }
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}{}{fragment}", out.finish())
}

impl Payments {
    /// The page of intent `raw` (`pi_…` or `seti_…`), if it exists.
    pub fn three_ds_page(&self, raw: &str) -> Option<Page> {
        if let Some(pi) = PaymentIntentId::parse(raw).and_then(|id| self.intents.get(&id)) {
            return Some(Page {
                what: "Payment",
                id: raw.to_string(),
                status: pi.status.as_str(),
                awaiting: pi.status == IntentStatus::RequiresAction,
                amount: Some((pi.amount, pi.currency.code())),
                card: pi.card().map(|c| (c.brand, c.last4())),
                description: pi.description().map(str::to_string),
                metadata: pi.metadata.iter().map(|(k, v)| (k.into(), v.into())).collect(),
                return_url: pi.next_action().and_then(|a| a.return_url.as_deref()).map(Into::into),
                action: format!("/__fauxpay/payment_intents/{raw}/authenticate"),
                in_frame: false,
            });
        }
        let si = SetupIntentId::parse(raw).and_then(|id| self.setup_intents.get(&id))?;
        let card = si
            .payment_method
            .and_then(|id| self.payment_methods.get(&id))
            .map(|pm| pm.card);
        Some(Page {
            what: "Setup",
            id: raw.to_string(),
            status: si.status.as_str(),
            awaiting: si.status == SetupStatus::RequiresAction,
            amount: None,
            card: card.map(|c| (c.brand, c.last4())),
            description: si.description.as_deref().map(str::to_string),
            metadata: si.metadata.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            return_url: si
                .next_action
                .as_ref()
                .and_then(|a| a.return_url.as_deref())
                .map(Into::into),
            action: format!("/__fauxpay/setup_intents/{raw}/authenticate"),
            in_frame: false,
        })
    }

    /// The `return_url` intent `raw` waits to send the customer back to, if it is
    /// waiting for authentication and was confirmed with one.
    pub fn pending_return_url(&self, raw: &str) -> Option<String> {
        if let Some(pi) = PaymentIntentId::parse(raw).and_then(|id| self.intents.get(&id)) {
            return pi.next_action()?.return_url.as_deref().map(Into::into);
        }
        let si = SetupIntentId::parse(raw).and_then(|id| self.setup_intents.get(&id))?;
        si.next_action.as_ref()?.return_url.as_deref().map(Into::into)
    }

    /// Where the customer goes once the authentication of `raw` was recorded:
    /// `return_url` with Stripe's query (`redirect_status` is `succeeded` when the
    /// intent went on to succeed or to wait for capture, else `failed`).
    pub fn return_after_authentication(&self, raw: &str, return_url: &str) -> String {
        if let Some(pi) = PaymentIntentId::parse(raw).and_then(|id| self.intents.get(&id)) {
            let ok = matches!(pi.status, IntentStatus::Succeeded | IntentStatus::RequiresCapture);
            let secret = format!("{raw}_secret_{}", &*pi.client_secret().text());
            return with_query(
                return_url,
                &[
                    ("payment_intent", raw),
                    ("payment_intent_client_secret", &secret),
                    ("redirect_status", if ok { "succeeded" } else { "failed" }),
                ],
            );
        }
        match SetupIntentId::parse(raw).and_then(|id| self.setup_intents.get(&id)) {
            Some(si) => with_query(
                return_url,
                &[
                    ("setup_intent", raw),
                    ("setup_intent_client_secret", &si.client_secret()),
                    (
                        "redirect_status",
                        if si.status == SetupStatus::Succeeded {
                            "succeeded"
                        } else {
                            "failed"
                        },
                    ),
                ],
            ),
            None => return_url.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_appended_before_the_fragment() {
        let q = [("payment_intent", "pi_1"), ("redirect_status", "succeeded")];
        assert_eq!(
            with_query("https://shop.example/done", &q),
            "https://shop.example/done?payment_intent=pi_1&redirect_status=succeeded"
        );
        assert_eq!(
            with_query("https://shop.example/done?order=7#top", &q),
            "https://shop.example/done?order=7&payment_intent=pi_1&redirect_status=succeeded#top"
        );
        assert_eq!(with_query("/back", &[("a", "x y&z")]), "/back?a=x+y%26z");
    }
}
