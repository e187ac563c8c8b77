//! Payment methods: create (`type=card` from a test token or a test card number),
//! retrieve, update (`billing_details`, `metadata`, expiry), attach to a customer,
//! detach, list (all, or a customer's); and what a payment intent's `payment_method`
//! names.
//!
//! As in Stripe's test mode, the magic ids (`pm_card_visa`, …) need no creating: a
//! payment intent charges them directly (minting a fresh `pm_…` id, as before), they
//! retrieve as objects under their own name, and attaching one to a customer clones it
//! into a new saved `pm_…`. A saved method attached to a customer pays only for that
//! customer; a detached one can never be used or attached again.

use std::sync::Arc;

use super::object::{year_month, Address, Attachment, BillingDetails, PaymentMethod};
use crate::error::{ApiError, ErrorType, Status};
use crate::fault_injection::attempt::Attempt;
use crate::reply::Reply;
use crate::resources::events::object::EventType;
use crate::state::clock::now_unix;
use crate::state::payments::Payments;
use crate::stripe::cards::{TestCard, CARDS};
use crate::stripe::fields::{metadata, metadata_update, payment_method, MAX_TEXT_LEN};
use crate::stripe::ids::{CustomerId, PaymentMethodId};
use crate::stripe::paging::list_page;
use crate::stripe::params::{Object, Params};

/// What a `pm_…` reference names: a saved payment method, or a magic test one.
#[derive(Debug, Clone)]
pub enum Named {
    Saved(Arc<PaymentMethod>),
    Test(&'static TestCard),
}

/// The payment method a payment intent charges: its card, and its id when it is a saved
/// one (a magic test method or raw card details get a fresh id, as before).
#[derive(Debug, Clone, Copy)]
pub struct Chosen {
    pub card: &'static TestCard,
    pub saved: Option<PaymentMethodId>,
}

impl Chosen {
    /// The id the intent records: the saved method's, or a fresh one.
    pub fn id(&self) -> PaymentMethodId {
        self.saved.unwrap_or_else(PaymentMethodId::generate)
    }
}

/// The magic test payment method `pm_card_<name>`, if `raw` is one.
pub fn test_card(raw: &str) -> Option<&'static TestCard> {
    let name = raw.strip_prefix("pm_card_")?;
    CARDS.iter().find(|c| c.name == name)
}

fn unknown_path(raw: &str) -> ApiError {
    ApiError::unknown_object("PaymentMethod", raw, "payment_method")
}

/// A 402 card error about the card's details.
fn card_detail_error(code: &'static str, message: &'static str, param: &str) -> ApiError {
    ApiError::new(Status::PaymentRequired, ErrorType::CardError, message)
        .with_code(code)
        .with_param(param)
        .executed()
}

/// A string at `key` of an object parameter, the error naming it `param`.
fn str_at<'a>(o: &Object<'a>, key: &str, param: &str) -> Result<Option<&'a str>, ApiError> {
    o.opt_str(key)
        .map_err(|_| ApiError::invalid_param(param, format!("Invalid string: {param} must be a string.")))
}

/// An integer at `key` of an object parameter, the error naming it `param`.
fn u64_at(o: &Object<'_>, key: &str, param: &str) -> Result<Option<u64>, ApiError> {
    o.opt_u64(key)
        .map_err(|_| ApiError::invalid_param(param, format!("Invalid integer: {param} must be an integer.")))
}

/// A text field of an update hash: `None` when not sent, `Some(None)` when sent empty.
fn text_at(o: &Object<'_>, key: &str, param: &str) -> Result<Option<Option<Box<str>>>, ApiError> {
    if o.get(key).is_none() {
        return Ok(None);
    }
    match str_at(o, key, param)? {
        Some(s) if s.chars().count() > MAX_TEXT_LEN => Err(ApiError::invalid_param(
            param,
            format!("{param} can be at most {MAX_TEXT_LEN} characters."),
        )),
        other => Ok(Some(other.map(Box::from))),
    }
}

/// Applies `billing_details[…]` to `b`: each field sent replaces it, an empty one unsets
/// it (`billing_details[address]=` unsets the whole address).
fn apply_billing(b: &mut BillingDetails, o: Object<'_>) -> Result<(), ApiError> {
    for (key, slot) in [("email", &mut b.email), ("name", &mut b.name), ("phone", &mut b.phone)] {
        if let Some(v) = text_at(&o, key, &format!("billing_details[{key}]"))? {
            *slot = v;
        }
    }
    match o.get("address") {
        None => {}
        Some(a) if a.as_str() == Some("") => b.address = Address::default(),
        Some(a) => {
            let a = a.as_object().ok_or_else(|| {
                ApiError::invalid_param(
                    "billing_details[address]",
                    "Invalid object: billing_details[address] must be a hash.",
                )
            })?;
            let addr = &mut b.address;
            for (key, slot) in [
                ("city", &mut addr.city),
                ("country", &mut addr.country),
                ("line1", &mut addr.line1),
                ("line2", &mut addr.line2),
                ("postal_code", &mut addr.postal_code),
                ("state", &mut addr.state),
            ] {
                if let Some(v) = text_at(&a, key, &format!("billing_details[address][{key}]"))? {
                    *slot = v;
                }
            }
        }
    }
    Ok(())
}

/// `billing_details` of `p` applied over `current`; `None` when every field is empty.
fn billing_details(current: Option<&BillingDetails>, p: &Params) -> Result<Option<Box<BillingDetails>>, ApiError> {
    let mut b = current.cloned().unwrap_or_default();
    if let Some(o) = p.opt_object("billing_details")? {
        apply_billing(&mut b, o)?;
    }
    Ok((b != BillingDetails::default()).then(|| Box::new(b)))
}

/// A card expiry, checked as Stripe checks it (two-digit years are this century's).
fn expiry(month: u64, year: u64) -> Result<(u8, u16), ApiError> {
    let (now_year, now_month) = year_month(now_unix());
    if !(1..=12).contains(&month) {
        return Err(card_detail_error(
            "invalid_expiry_month",
            "Your card's expiration month is invalid.",
            "card[exp_month]",
        ));
    }
    let year = if year < 100 { year + 2000 } else { year };
    let now_year = u64::try_from(now_year).unwrap_or(0);
    if year < now_year || (year == now_year && month < u64::from(now_month)) || year > now_year + 50 {
        return Err(card_detail_error(
            "invalid_expiry_year",
            "Your card's expiration year is invalid.",
            "card[exp_year]",
        ));
    }
    Ok((month as u8, year as u16))
}

/// The card of `card[…]` on a create: a test token (`card[token]=tok_visa`) or a test
/// card number with its expiry (`card[number]`, `card[exp_month]`, `card[exp_year]`,
/// optional `card[cvc]`).
fn new_card(p: &Params) -> Result<PaymentMethod, ApiError> {
    let card = p.opt_object("card")?.ok_or_else(|| ApiError::missing_param("card"))?;
    if let Some(token) = str_at(&card, "token", "card[token]")? {
        let found = token.strip_prefix("tok_").and_then(|_| TestCard::resolve(token));
        return found
            .map(PaymentMethod::new)
            .ok_or_else(|| ApiError::unknown_reference("token", token, "card[token]"));
    }
    let number = str_at(&card, "number", "card[number]")?.ok_or_else(|| ApiError::missing_param("card[number]"))?;
    let digits_only = number.bytes().all(|b| b.is_ascii_digit() || b == b' ' || b == b'-');
    let test_card = TestCard::resolve(number)
        .filter(|_| digits_only)
        .ok_or_else(|| card_detail_error("incorrect_number", "Your card number is incorrect.", "card[number]"))?;
    let month =
        u64_at(&card, "exp_month", "card[exp_month]")?.ok_or_else(|| ApiError::missing_param("card[exp_month]"))?;
    let year = u64_at(&card, "exp_year", "card[exp_year]")?.ok_or_else(|| ApiError::missing_param("card[exp_year]"))?;
    let (exp_month, exp_year) = expiry(month, year)?;
    let cvc = str_at(&card, "cvc", "card[cvc]")?;
    if cvc.is_some_and(|c| !(3..=4).contains(&c.len()) || !c.bytes().all(|b| b.is_ascii_digit())) {
        return Err(card_detail_error(
            "invalid_cvc",
            "Your card's security code is invalid.",
            "card[cvc]",
        ));
    }
    Ok(PaymentMethod {
        exp_month,
        exp_year,
        cvc: cvc.is_some(),
        ..PaymentMethod::new(test_card)
    })
}

/// Whether a saved payment method may pay for an intent of `customer`, as Stripe decides.
fn check_usable(pm: &PaymentMethod, customer: Option<CustomerId>) -> Result<(), ApiError> {
    let id = pm.id;
    match (pm.attachment, customer) {
        (Attachment::Unattached, _) => Ok(()),
        (Attachment::Customer(owner), Some(c)) if owner == c => Ok(()),
        (Attachment::Customer(_), Some(_)) => Err(ApiError::invalid_request(
            format!("The customer does not have a payment method with the ID {id}. The payment method must be attached to the customer."),
            Some("payment_method".into()),
        )),
        (Attachment::Customer(owner), None) => Err(ApiError::invalid_request(
            format!("The PaymentMethod {id} belongs to the Customer {owner}. Please include the Customer in the `customer` parameter on the PaymentIntent."),
            Some("payment_method".into()),
        )),
        (Attachment::Detached, _) => Err(ApiError::invalid_request(
            "The provided PaymentMethod was previously used with a PaymentIntent without Customer attachment, shared with a connected account without Customer attachment, or was detached from a Customer. It may not be used again. To use a PaymentMethod multiple times, you must attach it to a Customer first.",
            Some("payment_method".into()),
        )),
    }
}

impl Payments {
    pub fn create_payment_method(&self, p: &Params) -> Result<Reply, ApiError> {
        match p.req_str("type")? {
            "card" => {}
            other => {
                return Err(ApiError::invalid_param(
                    "type",
                    format!("Invalid type: '{other}'. fauxpay models card payment methods only: type must be card."),
                ))
            }
        }
        let pm = PaymentMethod {
            billing_details: billing_details(None, p)?,
            metadata: metadata(p)?,
            ..new_card(p)?
        };
        let pm = Arc::new(pm);
        self.payment_methods.insert(pm.clone());
        Ok(Reply::PaymentMethod(pm))
    }

    /// What `raw` names, saved or magic.
    pub fn named_payment_method(&self, raw: &str) -> Option<Named> {
        match PaymentMethodId::parse(raw) {
            Some(id) => self.payment_methods.get(&id).map(Named::Saved),
            None => test_card(raw).map(Named::Test),
        }
    }

    pub fn retrieve_payment_method(&self, raw: &str) -> Result<Reply, ApiError> {
        match self.named_payment_method(raw) {
            Some(Named::Saved(pm)) => Ok(Reply::PaymentMethod(pm)),
            Some(Named::Test(card)) => Ok(Reply::Json(Box::new(PaymentMethod::test_json(card)))),
            None => Err(unknown_path(raw)),
        }
    }

    pub fn update_payment_method(&self, raw: &str, p: &Params) -> Result<Reply, ApiError> {
        let id = match self.named_payment_method(raw) {
            Some(Named::Saved(pm)) => pm.id,
            Some(Named::Test(_)) => {
                return Err(ApiError::invalid_request(
                    format!("{raw} is a test payment method and cannot be updated: create a payment method (or attach {raw} to a customer, which saves a copy) and update that."),
                    None,
                ))
            }
            None => return Err(unknown_path(raw)),
        };
        let exp = match p.opt_object("card")? {
            None => None,
            Some(card) => Some((
                u64_at(&card, "exp_month", "card[exp_month]")?,
                u64_at(&card, "exp_year", "card[exp_year]")?,
            )),
        };
        self.payment_methods
            .update(&id, |slot| {
                let mut pm = (**slot).clone();
                pm.billing_details = billing_details(pm.billing_details.as_deref(), p)?;
                pm.metadata = metadata_update(&pm.metadata, p)?;
                if let Some((month, year)) = exp {
                    let (m, y) = expiry(
                        month.unwrap_or(u64::from(pm.exp_month)),
                        year.unwrap_or(u64::from(pm.exp_year)),
                    )?;
                    pm.exp_month = m;
                    pm.exp_year = y;
                }
                *slot = Arc::new(pm);
                Ok(Reply::PaymentMethod(slot.clone()))
            })
            .unwrap_or_else(|| Err(unknown_path(raw)))
    }

    /// Attaches what `named` names to `customer` (a live customer): a magic test method
    /// is cloned into a new saved one; a saved one must be unattached (or already this
    /// customer's).
    pub fn attach(
        &self,
        named: Named,
        customer: CustomerId,
        attempt: &Attempt,
    ) -> Result<Arc<PaymentMethod>, ApiError> {
        let saved = match named {
            Named::Test(card) => {
                let pm = Arc::new(PaymentMethod {
                    attachment: Attachment::Customer(customer),
                    ..PaymentMethod::new(card)
                });
                self.payment_methods.insert(pm.clone());
                self.events.emit(
                    EventType::PaymentMethodAttached,
                    Reply::PaymentMethod(pm.clone()),
                    None,
                    attempt,
                );
                return Ok(pm);
            }
            Named::Saved(pm) => pm,
        };
        self.payment_methods
            .update(&saved.id, |slot| match slot.attachment {
                Attachment::Customer(c) if c == customer => Ok(slot.clone()),
                Attachment::Customer(_) => Err(ApiError::invalid_request(
                    "The payment method you provided has already been attached to a customer.",
                    None,
                )
                .executed()),
                Attachment::Detached => Err(ApiError::invalid_request(
                    "This PaymentMethod was previously used without being attached to a Customer or was detached from a Customer, and may not be used again.",
                    None,
                )
                .executed()),
                Attachment::Unattached => {
                    let mut pm = (**slot).clone();
                    pm.attachment = Attachment::Customer(customer);
                    *slot = Arc::new(pm);
                    self.events
                        .emit(EventType::PaymentMethodAttached, Reply::PaymentMethod(slot.clone()), None, attempt);
                    Ok(slot.clone())
                }
            })
            .unwrap_or_else(|| Err(unknown_path(&saved.id.as_str())))
    }

    pub fn attach_payment_method(&self, raw: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let customer = p.req_str("customer")?;
        let customer = self
            .live_customer(customer)
            .ok_or_else(|| ApiError::unknown_reference("customer", customer, "customer"))?;
        let named = self.named_payment_method(raw).ok_or_else(|| unknown_path(raw))?;
        self.attach(named, customer.id, attempt).map(Reply::PaymentMethod)
    }

    pub fn detach_payment_method(&self, raw: &str, attempt: &Attempt) -> Result<Reply, ApiError> {
        let not_attached = || {
            ApiError::invalid_request(
                "The payment method you provided is not attached to a customer so detachment is impossible.",
                None,
            )
            .executed()
        };
        let id = match self.named_payment_method(raw) {
            Some(Named::Saved(pm)) => pm.id,
            Some(Named::Test(_)) => return Err(not_attached()),
            None => return Err(unknown_path(raw)),
        };
        let (pm, owner) = self
            .payment_methods
            .update(&id, |slot| {
                let Attachment::Customer(owner) = slot.attachment else {
                    return Err(not_attached());
                };
                let mut pm = (**slot).clone();
                pm.attachment = Attachment::Detached;
                *slot = Arc::new(pm);
                self.events.emit(
                    EventType::PaymentMethodDetached,
                    Reply::PaymentMethod(slot.clone()),
                    None,
                    attempt,
                );
                Ok((slot.clone(), owner))
            })
            .unwrap_or_else(|| Err(unknown_path(raw)))?;
        // A detached method is no longer anyone's default, as at Stripe.
        self.forget_default_payment_method(owner, id);
        Ok(Reply::PaymentMethod(pm))
    }

    /// `GET /v1/payment_methods`: every saved payment method, or a customer's
    /// (`customer`), of a `type` (only `card` exists here).
    pub fn list_payment_methods(&self, p: &Params) -> Result<Reply, ApiError> {
        let customer = match p.opt_str("customer")? {
            None => None,
            Some(raw) => Some(
                self.live_customer(raw)
                    .ok_or_else(|| ApiError::unknown_reference("customer", raw, "customer"))?
                    .id,
            ),
        };
        self.payment_method_page(p, customer, "/v1/payment_methods")
    }

    /// `GET /v1/customers/{customer}/payment_methods`.
    pub fn list_customer_payment_methods(&self, raw: &str, p: &Params) -> Result<Reply, ApiError> {
        let customer = self
            .live_customer(raw)
            .ok_or_else(|| ApiError::unknown_object("customer", raw, "customer"))?;
        let url = format!("/v1/customers/{}/payment_methods", customer.id);
        self.payment_method_page(p, Some(customer.id), &url)
    }

    /// `GET /v1/customers/{id}/payment_methods/{sub}`: a payment method saved to that
    /// customer; one saved to no customer or another is no such payment method here.
    pub fn retrieve_customer_payment_method(&self, customer: &str, raw: &str) -> Result<Reply, ApiError> {
        let customer = self
            .live_customer(customer)
            .ok_or_else(|| ApiError::unknown_object("customer", customer, "customer"))?;
        PaymentMethodId::parse(raw)
            .and_then(|id| self.payment_methods.get(&id))
            .filter(|pm| pm.customer() == Some(customer.id))
            .map(Reply::PaymentMethod)
            .ok_or_else(|| unknown_path(raw))
    }

    fn payment_method_page(&self, p: &Params, customer: Option<CustomerId>, url: &str) -> Result<Reply, ApiError> {
        let card_type = p.opt_str("type")?.is_none_or(|t| t == "card");
        list_page(
            &self.payment_methods,
            p,
            url,
            PaymentMethodId::parse,
            |pm| card_type && customer.is_none_or(|c| pm.customer() == Some(c)),
            |pm| pm.to_json(),
        )
    }

    /// The payment method a payment intent's `payment_method` (or
    /// `payment_method_data[card][number]`) names, for an intent of `customer`: a saved
    /// one must be usable by that customer; anything else resolves to a test card.
    pub fn intent_payment_method(&self, p: &Params, customer: Option<CustomerId>) -> Result<Option<Chosen>, ApiError> {
        if let Some(raw) = p.opt_str("payment_method")? {
            if let Some(id) = PaymentMethodId::parse(raw) {
                let pm = self
                    .payment_methods
                    .get(&id)
                    .ok_or_else(|| ApiError::unknown_reference("PaymentMethod", raw, "payment_method"))?;
                check_usable(&pm, customer)?;
                return Ok(Some(Chosen {
                    card: pm.card,
                    saved: Some(id),
                }));
            }
        }
        Ok(payment_method(p)?.map(|card| Chosen { card, saved: None }))
    }

    /// Checks again, at confirmation, that an intent's saved payment method (if it has
    /// one) is still usable by its customer.
    pub fn check_intent_payment_method(
        &self,
        id: PaymentMethodId,
        customer: Option<CustomerId>,
    ) -> Result<(), ApiError> {
        match self.payment_methods.get(&id) {
            Some(pm) => check_usable(&pm, customer),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::test_support::{form, payments};

    fn customer(p: &Payments) -> String {
        p.create_customer(&form("email=a@b.c"), &attempt()).unwrap().json()["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn next_year() -> u16 {
        (year_month(now_unix()).0 + 1) as u16
    }

    #[test]
    fn create_from_a_token_or_a_test_number() {
        let p = payments();
        let a = p
            .create_payment_method(&form("type=card&card[token]=tok_mastercard"))
            .unwrap()
            .json();
        assert!(a["id"].as_str().unwrap().starts_with("pm_"));
        assert_eq!(a["card"]["brand"], "mastercard");
        assert_eq!(a["customer"], Value::Null);
        let body = format!(
            "type=card&card[number]=4242424242424242&card[exp_month]=7&card[exp_year]={}&card[cvc]=314&billing_details[name]=Jenny&metadata[k]=v",
            next_year()
        );
        let b = p.create_payment_method(&form(&body)).unwrap().json();
        assert_eq!(b["card"]["last4"], "4242");
        assert_eq!(b["card"]["exp_month"], 7);
        assert_eq!(b["card"]["exp_year"], next_year());
        assert_eq!(b["card"]["checks"]["cvc_check"], "unchecked");
        assert_eq!(b["billing_details"]["name"], "Jenny");
        assert_eq!(b["metadata"]["k"], "v");
        assert_eq!(p.retrieve_payment_method(b["id"].as_str().unwrap()).unwrap().json(), b);
    }

    #[test]
    fn bad_cards_are_errors_naming_the_param() {
        let p = payments();
        let y = next_year();
        let cases = [
            ("card[token]=tok_visa".to_string(), "type", 400),
            ("type=sepa_debit".into(), "type", 400),
            ("type=card".into(), "card", 400),
            ("type=card&card[token]=tok_nope".into(), "card[token]", 400),
            (
                format!("type=card&card[number]=4111111111111112&card[exp_month]=1&card[exp_year]={y}"),
                "card[number]",
                402,
            ),
            (
                format!("type=card&card[number]=4242424242424242&card[exp_year]={y}"),
                "card[exp_month]",
                400,
            ),
            (
                format!("type=card&card[number]=4242424242424242&card[exp_month]=13&card[exp_year]={y}"),
                "card[exp_month]",
                402,
            ),
            (
                "type=card&card[number]=4242424242424242&card[exp_month]=1&card[exp_year]=2001".into(),
                "card[exp_year]",
                402,
            ),
            (
                format!("type=card&card[number]=4242424242424242&card[exp_month]=1&card[exp_year]={y}&card[cvc]=12"),
                "card[cvc]",
                402,
            ),
        ];
        for (body, param, status) in cases {
            let e = p.create_payment_method(&form(&body)).unwrap_err();
            assert_eq!((e.param.as_deref(), e.status.code()), (Some(param), status), "{body}");
        }
        assert!(p.payment_methods.is_empty());
    }

    #[test]
    fn magic_ids_retrieve_and_clone_when_attached() {
        let p = payments();
        let visa = p.retrieve_payment_method("pm_card_visa").unwrap().json();
        assert_eq!(visa["id"], "pm_card_visa");
        assert_eq!(visa["card"]["last4"], "4242");
        assert_eq!(
            p.retrieve_payment_method("pm_card_nope").unwrap_err().status.code(),
            404
        );
        let cus = customer(&p);
        let a = p
            .attach_payment_method("pm_card_visa", &form(&format!("customer={cus}")), &attempt())
            .unwrap()
            .json();
        let b = p
            .attach_payment_method("pm_card_visa", &form(&format!("customer={cus}")), &attempt())
            .unwrap()
            .json();
        assert_ne!(a["id"], b["id"], "each attach saves a new copy");
        assert!(a["id"].as_str().unwrap().starts_with("pm_") && a["id"] != "pm_card_visa");
        assert_eq!(a["customer"], cus.as_str());
        let list = p.list_customer_payment_methods(&cus, &form("")).unwrap().json();
        assert_eq!(list["data"].as_array().unwrap().len(), 2);
        assert_eq!(list["data"][0]["id"], b["id"], "newest first");
        assert_eq!(list["url"], format!("/v1/customers/{cus}/payment_methods"));
    }

    #[test]
    fn attach_detach_rules() {
        let p = payments();
        let (a, b) = (customer(&p), customer(&p));
        let pm = p
            .create_payment_method(&form("type=card&card[token]=tok_visa"))
            .unwrap()
            .json();
        let id = pm["id"].as_str().unwrap();
        let e = p.detach_payment_method(id, &attempt()).unwrap_err();
        assert!(e.message.contains("not attached"), "{e}");
        assert!(p.attach_payment_method(id, &form(""), &attempt()).is_err());
        let e = p
            .attach_payment_method(id, &form("customer=cus_nope"), &attempt())
            .unwrap_err();
        assert_eq!((e.status.code(), e.param.as_deref()), (400, Some("customer")));
        let e = p
            .attach_payment_method("pm_nope", &form(&format!("customer={a}")), &attempt())
            .unwrap_err();
        assert_eq!(e.status.code(), 404);
        assert_eq!(
            p.attach_payment_method(id, &form(&format!("customer={a}")), &attempt())
                .unwrap()
                .json()["customer"],
            a
        );
        assert_eq!(
            p.attach_payment_method(id, &form(&format!("customer={a}")), &attempt())
                .unwrap()
                .json()["customer"],
            a,
            "again to the same customer: unchanged"
        );
        let e = p
            .attach_payment_method(id, &form(&format!("customer={b}")), &attempt())
            .unwrap_err();
        assert!(e.message.contains("already been attached"), "{e}");
        assert_eq!(
            p.list_payment_methods(&form(&format!("customer={b}"))).unwrap().json()["data"],
            serde_json::json!([])
        );
        let detached = p.detach_payment_method(id, &attempt()).unwrap().json();
        assert_eq!(detached["customer"], Value::Null);
        let e = p
            .attach_payment_method(id, &form(&format!("customer={b}")), &attempt())
            .unwrap_err();
        assert!(e.message.contains("may not be used again"), "{e}");
        assert_eq!(
            p.list_customer_payment_methods(&a, &form("")).unwrap().json()["data"],
            serde_json::json!([])
        );
        assert_eq!(
            p.list_payment_methods(&form("type=card")).unwrap().json()["data"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            p.list_payment_methods(&form("type=sepa_debit")).unwrap().json()["data"],
            serde_json::json!([])
        );
    }

    #[test]
    fn updates_merge_billing_details_and_metadata() {
        let p = payments();
        let pm = p
            .create_payment_method(&form(
                "type=card&card[token]=tok_visa&billing_details[name]=A&billing_details[address][city]=Paris&metadata[a]=1",
            ))
            .unwrap()
            .json();
        let id = pm["id"].as_str().unwrap();
        let up = p
            .update_payment_method(
                id,
                &form("billing_details[email]=a@b.c&billing_details[name]=&metadata[b]=2&card[exp_month]=3"),
            )
            .unwrap()
            .json();
        assert_eq!(up["billing_details"]["name"], Value::Null);
        assert_eq!(up["billing_details"]["email"], "a@b.c");
        assert_eq!(up["billing_details"]["address"]["city"], "Paris");
        assert_eq!(up["metadata"], serde_json::json!({"a": "1", "b": "2"}));
        assert_eq!(up["card"]["exp_month"], 3);
        assert_eq!(up["card"]["exp_year"], pm["card"]["exp_year"]);
        assert!(p.update_payment_method("pm_card_visa", &form("metadata[a]=1")).is_err());
        assert_eq!(
            p.update_payment_method("pm_nope", &form("")).unwrap_err().status.code(),
            404
        );
        let e = p.update_payment_method(id, &form("card[exp_month]=0")).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("card[exp_month]"));
    }

    fn attempt() -> crate::fault_injection::attempt::Attempt {
        crate::fault_injection::attempt::Attempt::plain(crate::stripe::ids::RequestId::generate(), None)
    }

    #[test]
    fn intents_charge_a_saved_method_only_for_its_customer() {
        let p = payments();
        let a = p
            .create_customer(&form("payment_method=pm_card_visa"), &attempt())
            .unwrap()
            .json()["id"]
            .as_str()
            .unwrap()
            .to_string();
        let b = customer(&p);
        let saved = p.list_customer_payment_methods(&a, &form("")).unwrap().json()["data"][0]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let intent = |body: String| p.create_intent(&form(&format!("amount=500&currency=usd&{body}")), &attempt());

        let e = intent("customer=cus_nope".into()).unwrap_err();
        assert_eq!(
            (e.status.code(), e.code.as_deref(), e.param.as_deref()),
            (400, Some("resource_missing"), Some("customer"))
        );
        let e = intent(format!("customer={b}&payment_method={saved}&confirm=true")).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("payment_method"));
        assert!(e.message.contains("does not have a payment method"), "{e}");
        let e = intent(format!("payment_method={saved}")).unwrap_err();
        assert!(e.message.contains(&format!("belongs to the Customer {a}")), "{e}");
        assert!(p.intents.is_empty(), "nothing was created");

        let pi = intent(format!("customer={a}&payment_method={saved}&confirm=true"))
            .unwrap()
            .json();
        assert_eq!(pi["status"], "succeeded");
        assert_eq!(pi["customer"], a.as_str());
        assert_eq!(
            pi["payment_method"],
            saved.as_str(),
            "the saved method's id, not a fresh one"
        );
        let charge = p.retrieve_charge(pi["latest_charge"].as_str().unwrap()).unwrap().json();
        assert_eq!(charge["payment_method"], saved.as_str());

        // Two steps: confirming a B intent with A's method fails; so does one whose method
        // was detached since.
        let open = intent(format!("customer={b}")).unwrap().json();
        let e = p
            .confirm_intent(
                open["id"].as_str().unwrap(),
                &form(&format!("payment_method={saved}")),
                &attempt(),
            )
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("payment_method"));
        let pending = intent(format!("customer={a}&payment_method={saved}")).unwrap().json();
        p.detach_payment_method(&saved, &attempt()).unwrap();
        let e = p
            .confirm_intent(pending["id"].as_str().unwrap(), &form(""), &attempt())
            .unwrap_err();
        assert!(e.message.contains("may not be used again"), "{e}");
        assert_eq!(
            p.retrieve_intent(pending["id"].as_str().unwrap()).unwrap().json()["status"],
            "requires_confirmation"
        );

        // A saved, unattached method pays for anyone; magic ids work as before.
        let loose = p
            .create_payment_method(&form("type=card&card[token]=tok_visa"))
            .unwrap()
            .json();
        let ok = intent(format!("payment_method={}&confirm=true", loose["id"].as_str().unwrap()))
            .unwrap()
            .json();
        assert_eq!(ok["status"], "succeeded");
        let magic = intent(format!("customer={b}&payment_method=pm_card_visa&confirm=true"))
            .unwrap()
            .json();
        assert_eq!(magic["status"], "succeeded");
        assert_ne!(magic["payment_method"], "pm_card_visa");
    }
}
