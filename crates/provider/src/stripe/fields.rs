//! Turning request fields into domain values (test cards, metadata, bounded text) and
//! the pieces several operations share: the ledger movement of a charge and the
//! errors of a decline or a blocked duplicate.

use std::sync::Arc;

use crate::error::{ApiError, ErrorType, Status};
use crate::fault_injection::attempt::Attempt;
use crate::resources::charges::object::Charge;
use crate::state::ledger::{Moved, Movement};
use crate::stripe::cards::{Decline, TestCard};
use crate::stripe::ids::CheckoutSessionId;
use crate::stripe::json::Metadata;
use crate::stripe::params::{Object, Params};

/// Stripe's metadata limits.
const MAX_METADATA_KEYS: usize = 50;
const MAX_METADATA_KEY_LEN: usize = 40;
const MAX_METADATA_VALUE_LEN: usize = 500;

/// Stripe's longest free-text field (`description`, billing details, …): the spec's
/// `maxLength` for most of them, checked again where a rule reads the text.
pub const MAX_TEXT_LEN: usize = 5_000;

/// `return_url`, where a customer's browser is sent after 3-D Secure: an absolute
/// `http(s)` URL, as Stripe requires (a `javascript:` or `data:` one would run in the
/// customer's browser on fauxpay's page); otherwise 400 `url_invalid` naming the param.
pub fn return_url(p: &Params) -> Result<Option<&str>, ApiError> {
    url_param(p, "return_url")
}

/// A URL parameter (`return_url`, a Checkout Session's `success_url` and `cancel_url`):
/// an absolute `http(s)` URL, else 400 `url_invalid` naming it.
pub fn url_param<'a>(p: &'a Params, name: &str) -> Result<Option<&'a str>, ApiError> {
    let Some(url) = p.opt_str(name)? else {
        return Ok(None);
    };
    let scheme_ok = ["http://", "https://"]
        .iter()
        .any(|s| url.get(..s.len()).is_some_and(|head| head.eq_ignore_ascii_case(s)) && url.len() > s.len());
    if !scheme_ok || url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(ApiError::invalid_param(name, "Not a valid URL").with_code("url_invalid"));
    }
    Ok(Some(url))
}

/// The ledger movement of a captured charge (made for `checkout_session`, if any).
/// `charge` is the snapshot being stored, already captured: the ledger record reads its
/// id, captured amount, currency and intent from it.
pub fn movement_for(charge: &Arc<Charge>, checkout_session: Option<CheckoutSessionId>, attempt: &Attempt) -> Movement {
    Movement {
        moved: Moved::Charge(charge.clone()),
        checkout_session,
        attempt: attempt.clone(),
    }
}

/// A 402 card error, stored and replayed like any executed response.
pub fn card_error(d: &Decline) -> ApiError {
    let mut e = ApiError::new(Status::PaymentRequired, ErrorType::CardError, d.message.clone())
        .with_code(d.code.clone())
        .executed();
    e.decline_code = Some(d.decline_code.clone());
    e
}

pub fn duplicate_decline() -> ApiError {
    card_error(&Decline {
        code: "card_declined".into(),
        decline_code: "duplicate_transaction".into(),
        message: "A transaction with identical amount and payment details was submitted very recently for this order (fauxpay --duplicates reject).".into(),
    })
}

/// The test card named by `payment_method` (or `payment_method_data[card][number]`).
pub fn payment_method(p: &Params) -> Result<Option<&'static TestCard>, ApiError> {
    if let Some(pm) = p.opt_str("payment_method")? {
        // A magic `pm_fault_…` method charges its underlying test card.
        let card = fauxpay_faults::forced_by_payment_method(pm).map_or(pm, |(_, card)| card);
        return TestCard::resolve(card)
            .map(Some)
            .ok_or_else(|| ApiError::unknown_reference("PaymentMethod", pm, "payment_method"));
    }
    if let Some(data) = p.opt_object("payment_method_data")? {
        let number = data
            .get("card")
            .and_then(|c| c.as_object()?.get("number"))
            .and_then(|n| n.as_str());
        return match number {
            Some(n) => TestCard::resolve(n).map(Some).ok_or_else(|| {
                card_error(&Decline {
                    code: "incorrect_number".into(),
                    decline_code: "incorrect_number".into(),
                    message: "Your card number is incorrect.".into(),
                })
                .with_param("payment_method_data[card][number]")
            }),
            None => Err(ApiError::missing_param("payment_method_data[card][number]")),
        };
    }
    Ok(None)
}

/// The test card named by a charge's `source` (a token, or `source[number]`).
pub fn source(p: &Params) -> Result<&'static TestCard, ApiError> {
    let reference = match p.get("source") {
        Some(source) => match source.as_object() {
            Some(card) => card
                .get("number")
                .and_then(|n| n.as_str())
                .ok_or_else(|| ApiError::missing_param("source[number]"))?,
            None => p.req_str("source")?,
        },
        None => return Err(ApiError::missing_param("source")),
    };
    TestCard::resolve(reference).ok_or_else(|| ApiError::unknown_reference("source", reference, "source"))
}

pub fn metadata(p: &Params) -> Result<Metadata, ApiError> {
    metadata_in(p.opt_object("metadata")?, "metadata")
}

/// A metadata hash found at `name` (bracket notation, e.g.
/// `payment_intent_data[metadata]`), checked against Stripe's limits; errors name the
/// offending entry under `name`.
pub fn metadata_in(map: Option<Object<'_>>, name: &str) -> Result<Metadata, ApiError> {
    let Some(map) = map else {
        return Ok(Metadata::new());
    };
    let mut out: Vec<(&str, &str)> = Vec::with_capacity(map.len());
    if map.len() > MAX_METADATA_KEYS {
        return Err(ApiError::invalid_param(
            name,
            format!("Metadata can have at most {MAX_METADATA_KEYS} keys."),
        ));
    }
    // The params map is sorted by key, so the metadata is too.
    for (k, v) in map.iter() {
        let param = || format!("{name}[{k}]");
        if k.chars().count() > MAX_METADATA_KEY_LEN {
            return Err(ApiError::invalid_param(
                &param(),
                format!("Metadata keys can be at most {MAX_METADATA_KEY_LEN} characters."),
            ));
        }
        if v.is_container() {
            return Err(ApiError::invalid_param(&param(), "Metadata values must be strings."));
        }
        // A number or boolean counts as its text; null and "" as absent.
        let Some(v) = v.as_text() else {
            continue;
        };
        if v.chars().count() > MAX_METADATA_VALUE_LEN {
            return Err(ApiError::invalid_param(
                &param(),
                format!("Metadata values can be at most {MAX_METADATA_VALUE_LEN} characters."),
            ));
        }
        if !v.is_empty() {
            out.push((k, v));
        }
    }
    Ok(Metadata::from_sorted(&out))
}

pub fn text(p: &Params, name: &str) -> Result<Option<Box<str>>, ApiError> {
    match p.opt_str(name)? {
        Some(s) if s.chars().count() > MAX_TEXT_LEN => Err(ApiError::invalid_param(
            name,
            format!("{name} can be at most {MAX_TEXT_LEN} characters."),
        )),
        other => Ok(other.map(Box::from)),
    }
}

/// `metadata` on an update, merged as Stripe merges it: each key sent is set, a key sent
/// empty is removed, and `metadata=` (empty) removes every key.
pub fn metadata_update(current: &Metadata, p: &Params) -> Result<Metadata, ApiError> {
    let Some(param) = p.get("metadata") else {
        return Ok(current.clone());
    };
    if param.as_str() == Some("") {
        return Ok(Metadata::new());
    }
    let Some(map) = param.as_object() else {
        return Err(ApiError::invalid_param(
            "metadata",
            "Invalid object: metadata must be a hash (e.g. metadata[key]=value).",
        ));
    };
    let mut merged: std::collections::BTreeMap<&str, &str> = current.iter().collect();
    for (k, v) in map.iter() {
        let param = || format!("metadata[{k}]");
        if k.chars().count() > MAX_METADATA_KEY_LEN {
            return Err(ApiError::invalid_param(
                &param(),
                format!("Metadata keys can be at most {MAX_METADATA_KEY_LEN} characters."),
            ));
        }
        if v.is_container() {
            return Err(ApiError::invalid_param(&param(), "Metadata values must be strings."));
        }
        match v.as_text() {
            None => {
                merged.remove(k);
            }
            Some(v) if v.chars().count() > MAX_METADATA_VALUE_LEN => {
                return Err(ApiError::invalid_param(
                    &param(),
                    format!("Metadata values can be at most {MAX_METADATA_VALUE_LEN} characters."),
                ))
            }
            Some(v) => {
                merged.insert(k, v);
            }
        }
    }
    if merged.len() > MAX_METADATA_KEYS {
        return Err(ApiError::invalid_param(
            "metadata",
            format!("Metadata can have at most {MAX_METADATA_KEYS} keys."),
        ));
    }
    Ok(Metadata::from_sorted(&merged.into_iter().collect::<Vec<_>>()))
}

/// A free-text field of at most `max` characters (Stripe's `maxLength` for it).
pub fn text_at_most(p: &Params, name: &str, max: usize) -> Result<Option<Box<str>>, ApiError> {
    match p.opt_str(name)? {
        Some(s) if s.chars().count() > max => Err(ApiError::invalid_param(
            name,
            format!("{name} can be at most {max} characters."),
        )),
        other => Ok(other.map(Box::from)),
    }
}

/// A free-text field on an update: `None` when not sent (keep it), `Some(None)` when sent
/// empty (unset it, as Stripe does), else the new text (at most `max` characters).
pub fn text_update(p: &Params, name: &str, max: usize) -> Result<Option<Option<Box<str>>>, ApiError> {
    if !p.contains(name) {
        return Ok(None);
    }
    text_at_most(p, name, max).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(s: &str) -> Params {
        Params::from_form(s.as_bytes()).unwrap()
    }

    #[test]
    fn metadata_updates_merge_keys() {
        let current = Metadata::from_sorted(&[("a", "1"), ("b", "2")]);
        let keep = metadata_update(&current, &form("name=x")).unwrap();
        assert_eq!(keep, current);
        let merged = metadata_update(&current, &form("metadata[b]=&metadata[c]=3&metadata[a]=9")).unwrap();
        assert_eq!(merged.iter().collect::<Vec<_>>(), [("a", "9"), ("c", "3")]);
        assert!(metadata_update(&current, &form("metadata=")).unwrap().is_empty());
        let too_many: String = (0..=MAX_METADATA_KEYS).map(|i| format!("metadata[k{i}]=v&")).collect();
        assert_eq!(
            metadata_update(&current, &form(&too_many))
                .unwrap_err()
                .param
                .as_deref(),
            Some("metadata")
        );
        let long_key = format!("metadata[{}]=v", "k".repeat(41));
        assert!(metadata_update(&current, &form(&long_key)).is_err());
        assert!(metadata_update(&current, &form("metadata=x")).is_err());
    }

    #[test]
    fn text_updates_keep_unset_or_replace() {
        assert_eq!(text_update(&form("a=1"), "email", 10).unwrap(), None);
        assert_eq!(text_update(&form("email="), "email", 10).unwrap(), Some(None));
        assert_eq!(
            text_update(&form("email=x"), "email", 10).unwrap(),
            Some(Some("x".into()))
        );
        let err = text_update(&form("phone=123456789012345678901"), "phone", 20).unwrap_err();
        assert_eq!(err.param.as_deref(), Some("phone"));
    }
}

#[cfg(test)]
mod return_url_tests {
    use super::*;

    #[test]
    fn a_return_url_is_an_absolute_http_url() {
        let url = |v: &str| {
            let p = Params::from_form(
                format!(
                    "return_url={}",
                    form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>()
                )
                .as_bytes(),
            )
            .unwrap();
            return_url(&p)
                .map(|u| u.map(str::to_string))
                .map_err(|e| (e.param, e.code))
        };
        assert_eq!(
            url("https://shop.example/done?x=1"),
            Ok(Some("https://shop.example/done?x=1".into()))
        );
        assert_eq!(
            url("HTTP://127.0.0.1:3000/back"),
            Ok(Some("HTTP://127.0.0.1:3000/back".into()))
        );
        for bad in [
            "javascript:alert(1)",
            "data:text/html,<script>x</script>",
            "//evil.example",
            "/relative",
            "https://",
            "https://a b",
        ] {
            let err = url(bad).unwrap_err();
            assert_eq!(err.0.as_deref(), Some("return_url"), "{bad}");
        }
    }
}

/// `e` with its `param` placed under `prefix` (`currency` inside `line_items[0][price_data]`
/// becomes `line_items[0][price_data][currency]`), for errors of a nested hash.
pub fn nested(prefix: &str, mut e: ApiError) -> ApiError {
    e.param = Some(match e.param.take() {
        None => prefix.to_string(),
        Some(inner) => match inner.split_once('[') {
            Some((head, rest)) => format!("{prefix}[{head}][{rest}"),
            None => format!("{prefix}[{inner}]"),
        },
    });
    e
}
