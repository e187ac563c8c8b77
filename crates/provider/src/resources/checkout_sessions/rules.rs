//! Checkout Sessions: create (line items from prices or `price_data`, the URLs, the
//! customer, what the payment intent will carry), retrieve, list
//! (`payment_intent`, `customer`, `customer_details[email]`), expire, and the line
//! items; then what the customer does on the hosted page (or its scripted stand-in):
//! pay, at most once.
//!
//! Paying runs under the session's own lock: the first pay makes the session's payment
//! intent (confirmed at once, under the usual rules: test cards decide, faults apply, a
//! 3-D Secure card waits for its challenge) and later pays confirm that same intent
//! again, so a double click or N concurrent pays make one charge. The intent's events
//! come first; the session then completes (`checkout.session.completed`), at once or when
//! the 3-D Secure challenge is passed. The lock order is session → ledger → intent; an
//! intent's confirmation or authentication completes its session only after releasing
//! the intent's locks.

use std::sync::Arc;

use super::object::{CheckoutSession, IntentData, LineItem, SessionMode, SessionStatus, PAGE_PATH};
use crate::error::ApiError;
use crate::fault_injection::attempt::{Attempt, KeyKind};
use crate::reply::Reply;
use crate::resources::client_secret::as_seen_by_publishable_key;
use crate::resources::events::object::EventType;
use crate::resources::payment_intents::object::IntentStatus;
use crate::resources::prices::object::Price;
use crate::resources::prices::rules::PriceTerms;
use crate::resources::products::object::Product;
use crate::resources::setup_intents::object::SetupStatus;
use crate::state::clock::now_unix;
use crate::state::payments::Payments;
use crate::stripe::fields::{metadata, metadata_in, nested, url_param};
use crate::stripe::ids::{CheckoutSessionId, LineItemId, ProductId};
use crate::stripe::money::check_amount;
use crate::stripe::paging::list_page;
use crate::stripe::params::{Kind, Object, Params};

/// The most line items a session may have (Stripe's limit in payment mode).
pub const MAX_LINE_ITEMS: usize = 100;
const MAX_QUANTITY: u64 = 999_999;
const MAX_CLIENT_REFERENCE: usize = 200;
const MAX_EMAIL: usize = 512;
/// A session's life, as Stripe bounds `expires_at`: 30 minutes to 24 hours.
const MIN_LIFE: i64 = 30 * 60;
const MAX_LIFE: i64 = 24 * 60 * 60;

fn unknown_path(raw: &str) -> ApiError {
    ApiError::unknown_object("checkout.session", raw, "session")
}

/// What the customer's pay is refused with once the session cannot be paid: a 400
/// naming why (already paid, expired), stored like any executed answer.
fn not_payable(s: &CheckoutSession) -> ApiError {
    let message = match s.status {
        SessionStatus::Expired => "This Checkout Session has expired and can no longer be paid.",
        _ => "This Checkout Session has already been paid: it is complete.",
    };
    ApiError::invalid_request(message, None)
        .with_code("checkout_session_not_open")
        .executed()
}

/// A parameter form (bracket notation), built from pairs.
fn form<K: AsRef<str>, V: AsRef<str>>(pairs: impl IntoIterator<Item = (K, V)>) -> Result<Params, ApiError> {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        out.append_pair(k.as_ref(), v.as_ref());
    }
    Params::from_form(out.finish().as_bytes())
}

/// The id of the object `key` (`payment_intent`, `setup_intent`) a refused operation's
/// error carries: a declined payment still made its intent.
fn id_in_error<'e>(e: &'e ApiError, key: &str) -> Option<&'e str> {
    e.extra
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v["id"].as_str())
}

/// What a create made from `price_data` (and `product_data`), stored, as at Stripe and
/// without events, only once the whole create is accepted.
#[derive(Default)]
struct Inline {
    products: Vec<Arc<Product>>,
    prices: Vec<Arc<Price>>,
}

impl Payments {
    /// The line items of a create, in order.
    fn line_items(&self, p: &Params, mode: SessionMode, inline: &mut Inline) -> Result<Vec<LineItem>, ApiError> {
        let items = match p.get("line_items").map(|v| v.kind()) {
            None => return Ok(Vec::new()),
            Some(Kind::List(items)) => items,
            Some(_) => {
                return Err(ApiError::invalid_param(
                    "line_items",
                    "Invalid array: line_items must be a list (line_items[0][price]=…).",
                ))
            }
        };
        if items.len() > MAX_LINE_ITEMS {
            return Err(ApiError::invalid_param(
                "line_items",
                format!("A Checkout Session may have at most {MAX_LINE_ITEMS} line items."),
            ));
        }
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let at = format!("line_items[{i}]");
            let o = item
                .as_object()
                .ok_or_else(|| ApiError::invalid_param(&at, format!("Invalid object: {at} must be a hash.")))?;
            out.push(self.line_item(&o, &at, mode, inline)?);
        }
        Ok(out)
    }

    fn line_item(
        &self,
        o: &Object<'_>,
        at: &str,
        mode: SessionMode,
        inline: &mut Inline,
    ) -> Result<LineItem, ApiError> {
        let inner = |e: ApiError| nested(at, e);
        let price: Arc<Price> = match (
            o.opt_str("price").map_err(inner)?,
            o.opt_object("price_data").map_err(inner)?,
        ) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid_param(
                    &format!("{at}[price_data]"),
                    format!("You may only specify one of these parameters: {at}[price], {at}[price_data]."),
                ))
            }
            (Some(raw), None) => {
                let price = self
                    .price(raw)
                    .ok_or_else(|| ApiError::unknown_reference("price", raw, &format!("{at}[price]")))?;
                if !price.active {
                    return Err(ApiError::invalid_param(
                        &format!("{at}[price]"),
                        "The price specified is inactive. This field only accepts active prices.",
                    ));
                }
                price
            }
            (None, Some(data)) => self
                .inline_price(&data, inline)
                .map_err(|e| nested(&format!("{at}[price_data]"), e))?,
            (None, None) => {
                return Err(ApiError::invalid_param(
                    &format!("{at}[price]"),
                    format!("You must specify either `price` or `price_data` in {at}."),
                ))
            }
        };
        if mode == SessionMode::Payment && price.recurring.is_some() {
            return Err(ApiError::invalid_param(
                &format!("{at}[price]"),
                "You specified `payment` mode but passed a recurring price. Either switch to `subscription` mode or use only one-time prices.",
            ));
        }
        let quantity = o
            .opt_u64("quantity")
            .map_err(inner)?
            .ok_or_else(|| ApiError::missing_param(&format!("{at}[quantity]")))?;
        if quantity == 0 || quantity > MAX_QUANTITY {
            return Err(ApiError::invalid_param(
                &format!("{at}[quantity]"),
                format!("Quantity must be between 1 and {MAX_QUANTITY}."),
            ));
        }
        let description = inline
            .products
            .iter()
            .find(|p| p.id == price.product)
            .cloned()
            .or_else(|| self.products.get(&price.product))
            .map_or_else(|| price.product.to_string(), |p| p.name().to_string());
        Ok(LineItem {
            id: LineItemId::generate(),
            price,
            description: description.into(),
            quantity,
        })
    }

    /// A price made for one session from `price_data` (with `product` or `product_data`),
    /// kept in `inline` until the create is accepted.
    fn inline_price(&self, data: &Object<'_>, inline: &mut Inline) -> Result<Arc<Price>, ApiError> {
        let terms = PriceTerms::read(data)?;
        let product: ProductId = match (data.opt_str("product")?, data.opt_object("product_data")?) {
            (Some(raw), _) => self
                .live_product(raw)
                .ok_or_else(|| ApiError::unknown_reference("product", raw, "product"))?
                .id
                .clone(),
            (None, Some(pd)) => {
                let mut product = self.new_product(&pd).map_err(|e| nested("product_data", e))?;
                product.active = false;
                product.inline = true;
                let product = Arc::new(product);
                let id = product.id.clone();
                inline.products.push(product);
                id
            }
            (None, None) => {
                return Err(ApiError::invalid_request(
                    "You must specify either `product` or `product_data`.",
                    Some("product".into()),
                ))
            }
        };
        let mut price = terms.price(product);
        price.active = false;
        price.inline = true;
        let price = Arc::new(price);
        inline.prices.push(price.clone());
        Ok(price)
    }

    pub fn create_checkout_session(&self, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let mode = match p.opt_str("mode")? {
            Some("payment") => SessionMode::Payment,
            Some("setup") => SessionMode::Setup,
            Some("subscription") => {
                return Err(ApiError::invalid_param(
                    "mode",
                    "fauxpay does not model subscriptions: mode may be payment or setup.",
                ))
            }
            Some(other) => {
                return Err(ApiError::invalid_param(
                    "mode",
                    format!("Invalid mode: must be one of payment, setup or subscription (got {other})."),
                ))
            }
            None => return Err(ApiError::missing_param("mode")),
        };
        match p.opt_str("ui_mode")? {
            None | Some("hosted") => {}
            Some(other) => {
                return Err(ApiError::invalid_param(
                    "ui_mode",
                    format!("fauxpay hosts the Checkout page itself: ui_mode may only be hosted (got {other}; embedded and custom need Stripe.js, which fauxpay does not stand in for yet)."),
                ))
            }
        }
        let success_url = url_param(p, "success_url")?;
        let cancel_url = url_param(p, "cancel_url")?;
        let mut inline = Inline::default();
        let line_items = self.line_items(p, mode, &mut inline)?;
        let currency = match mode {
            SessionMode::Payment => {
                let Some(first) = line_items.first() else {
                    return Err(ApiError::missing_param("line_items"));
                };
                let currency = first.price.currency;
                if let Some(i) = line_items.iter().position(|l| l.price.currency != currency) {
                    return Err(ApiError::invalid_param(
                        &format!("line_items[{i}][price]"),
                        "All line items of a Checkout Session must be in the same currency.",
                    ));
                }
                let total = line_items.iter().map(LineItem::amount).fold(0, u64::saturating_add);
                check_amount("line_items", total, currency).map_err(|mut e| {
                    e.message = format!(
                        "The Checkout Session's total amount due is out of bounds: {}",
                        e.message
                    );
                    e
                })?;
                Some(currency)
            }
            SessionMode::Setup => {
                if !line_items.is_empty() {
                    return Err(ApiError::invalid_param(
                        "line_items",
                        "line_items cannot be used in setup mode.",
                    ));
                }
                match p.opt_str("currency")? {
                    Some(c) => Some(crate::stripe::money::Currency::parse(c)?),
                    None => None,
                }
            }
        };
        let customer = self.customer_param(p, "customer")?;
        let customer_email = p.opt_str("customer_email")?;
        if customer.is_some() && customer_email.is_some() {
            return Err(ApiError::invalid_param(
                "customer_email",
                "You may only specify one of these parameters: customer, customer_email.",
            ));
        }
        if customer_email.is_some_and(|e| e.len() > MAX_EMAIL || !e.contains('@')) {
            return Err(ApiError::invalid_param("customer_email", "Invalid email address."));
        }
        let customer_creation = match p.opt_str("customer_creation")? {
            None => None,
            Some(_) if mode != SessionMode::Payment => {
                return Err(ApiError::invalid_param(
                    "customer_creation",
                    "customer_creation can only be used in payment mode.",
                ))
            }
            Some(_) if customer.is_some() => {
                return Err(ApiError::invalid_param(
                    "customer_creation",
                    "customer_creation cannot be used with customer.",
                ))
            }
            Some("always") => Some("always"),
            Some("if_required") => Some("if_required"),
            Some(other) => {
                return Err(ApiError::invalid_param(
                    "customer_creation",
                    format!("Invalid customer_creation: must be always or if_required (got {other})."),
                ))
            }
        };
        let client_reference_id = match p.opt_str("client_reference_id")? {
            Some(c) if c.chars().count() > MAX_CLIENT_REFERENCE => {
                return Err(ApiError::invalid_param(
                    "client_reference_id",
                    format!("client_reference_id can be at most {MAX_CLIENT_REFERENCE} characters."),
                ))
            }
            other => other,
        };
        let now = now_unix();
        let expires_at = match p.opt_u64("expires_at")? {
            None => now + MAX_LIFE,
            Some(t) => {
                let t = i64::try_from(t).unwrap_or(i64::MAX);
                if t < now + MIN_LIFE {
                    return Err(ApiError::invalid_param(
                        "expires_at",
                        "The `expires_at` timestamp must be at least 30 minutes from Checkout Session creation.",
                    ));
                }
                if t > now + MAX_LIFE {
                    return Err(ApiError::invalid_param(
                        "expires_at",
                        "The `expires_at` timestamp must be less than 24 hours from Checkout Session creation.",
                    ));
                }
                t
            }
        };
        let payment_method_types = match p.get("payment_method_types").map(|v| v.kind()) {
            None | Some(Kind::String("")) => vec![Box::<str>::from("card")],
            Some(Kind::List(items)) => {
                let types: Vec<&str> = items.iter().filter_map(|i| i.as_str()).collect();
                if types.len() != items.len() || types.iter().any(|t| *t != "card") {
                    return Err(ApiError::invalid_param(
                        "payment_method_types",
                        "fauxpay models card payments only: payment_method_types may list only card.",
                    ));
                }
                types.into_iter().map(Box::from).collect()
            }
            Some(_) => {
                return Err(ApiError::invalid_param(
                    "payment_method_types",
                    "Invalid array: payment_method_types must be a list (payment_method_types[]=card).",
                ))
            }
        };
        let intent_data = match p.opt_object("payment_intent_data")? {
            None => IntentData::default(),
            Some(_) if mode != SessionMode::Payment => {
                return Err(ApiError::invalid_param(
                    "payment_intent_data",
                    "payment_intent_data can only be used in payment mode.",
                ))
            }
            Some(d) => intent_data(&d).map_err(|e| nested("payment_intent_data", e))?,
        };
        let session = Arc::new(CheckoutSession {
            id: CheckoutSessionId::generate(),
            created: now,
            expires_at,
            mode,
            status: SessionStatus::Open,
            currency,
            line_items: line_items.into(),
            success_url: Some(
                success_url
                    .ok_or_else(|| ApiError::missing_param("success_url"))?
                    .into(),
            ),
            cancel_url: cancel_url.map(Into::into),
            client_reference_id: client_reference_id.map(Into::into),
            customer,
            customer_email: customer_email.map(Into::into),
            customer_creation,
            metadata: metadata(p)?,
            payment_method_types: payment_method_types.into(),
            intent_data,
            payment_intent: None,
            setup_intent: None,
            paid_email: None,
            correlation_id: attempt.correlation_id.clone().or_else(|| self.correlate.of_session(p)),
            origin: attempt.origin.clone(),
            clock_offset: attempt.clock_offset,
        });
        for product in inline.products {
            self.products.insert(product);
        }
        for price in inline.prices {
            self.prices.insert(price);
        }
        self.checkout_sessions.insert(session.clone());
        Ok(Reply::CheckoutSession(session))
    }

    /// The session `raw` names.
    pub fn checkout_session(&self, raw: &str) -> Option<Arc<CheckoutSession>> {
        CheckoutSessionId::parse(raw).and_then(|id| self.checkout_sessions.get(&id))
    }

    pub fn retrieve_checkout_session(&self, raw: &str) -> Result<Reply, ApiError> {
        self.checkout_session(raw)
            .map(Reply::CheckoutSession)
            .ok_or_else(|| unknown_path(raw))
    }

    pub fn list_checkout_sessions(&self, p: &Params) -> Result<Reply, ApiError> {
        let intent = p.opt_str("payment_intent")?;
        let customer = p.opt_str("customer")?;
        let email = match p.opt_object("customer_details")? {
            Some(d) => d.opt_str("email").map_err(|e| nested("customer_details", e))?,
            None => None,
        };
        list_page(
            &self.checkout_sessions,
            p,
            "/v1/checkout/sessions",
            CheckoutSessionId::parse,
            |s| {
                intent.is_none_or(|i| s.payment_intent.is_some_and(|x| *x.as_str() == *i))
                    && customer.is_none_or(|c| s.customer.is_some_and(|x| *x.as_str() == *c))
                    && email.is_none_or(|e| {
                        s.status == SessionStatus::Complete
                            && s.paid_email.as_deref().or(s.customer_email.as_deref()) == Some(e)
                    })
            },
            |s| s.to_json(),
        )
    }

    /// `GET /v1/checkout/sessions/{id}/line_items`: a list (ten by default, in order).
    pub fn list_line_items(&self, raw: &str, p: &Params) -> Result<Reply, ApiError> {
        let session = self.checkout_session(raw).ok_or_else(|| unknown_path(raw))?;
        let url = format!("/v1/checkout/sessions/{raw}/line_items");
        let req = crate::stripe::paging::list_request(p, |id| {
            session
                .line_items
                .iter()
                .position(|l| *l.id.as_str() == *id)
                .map(|i| i as u64)
        })?;
        let items = &session.line_items;
        let (from, to) = match req.cursor {
            crate::state::table::Cursor::Start => (0, items.len().min(req.limit)),
            crate::state::table::Cursor::StartingAfter(i) => {
                let from = (i as usize + 1).min(items.len());
                (from, (from + req.limit).min(items.len()))
            }
            crate::state::table::Cursor::EndingBefore(i) => {
                let to = i as usize;
                (to.saturating_sub(req.limit), to)
            }
        };
        let data: Vec<serde_json::Value> = items[from..to].iter().map(LineItem::to_json).collect();
        let has_more = match req.cursor {
            crate::state::table::Cursor::EndingBefore(_) => from > 0,
            _ => to < items.len(),
        };
        Ok(Reply::Json(Box::new(serde_json::json!({
            "object": "list",
            "data": data,
            "has_more": has_more,
            "url": url,
        }))))
    }

    /// `POST /v1/checkout/sessions/{id}/expire`: an open session only.
    pub fn expire_checkout_session(&self, raw: &str, attempt: &Attempt) -> Result<Reply, ApiError> {
        let id = CheckoutSessionId::parse(raw).ok_or_else(|| unknown_path(raw))?;
        self.expire_if(&id, attempt, |_| true)
            .unwrap_or_else(|| Err(unknown_path(raw)))
    }

    /// `POST /__fauxpay/checkout/sessions/{id}/lapse` (the provider's own, never sent by a
    /// client): expires the session if it is open and its `expires_at` is not after `now`
    /// (the provider's time, sent as a parameter so that recovery runs it the same).
    pub fn lapse_checkout_session(&self, raw: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let id = CheckoutSessionId::parse(raw).ok_or_else(|| unknown_path(raw))?;
        let now = p.opt_u64("now")?.ok_or_else(|| ApiError::missing_param("now"))? as i64;
        self.expire_if(&id, attempt, |s| s.due(now))
            .unwrap_or_else(|| Err(unknown_path(raw)))
    }

    fn expire_if(
        &self,
        id: &CheckoutSessionId,
        attempt: &Attempt,
        due: impl FnOnce(&CheckoutSession) -> bool,
    ) -> Option<Result<Reply, ApiError>> {
        self.checkout_sessions.update(id, |slot| {
            if slot.status != SessionStatus::Open {
                return Err(ApiError::invalid_request(
                    format!(
                        "Only Checkout Sessions with a status in [\"open\"] can be expired. This Checkout Session has a status of {}.",
                        slot.status.as_str()
                    ),
                    None,
                )
                .executed());
            }
            if !due(slot) {
                return Err(ApiError::invalid_request("This Checkout Session is not due to expire yet.", None).executed());
            }
            // A customer can no longer complete it: its intent, if still open, is canceled
            // (a pending 3-D Secure challenge or a browser holding its client_secret cannot
            // charge it any more).
            if let Some(pi) = slot.payment_intent {
                let open = self.intents.get(&pi).is_some_and(|i| {
                    matches!(
                        i.status,
                        IntentStatus::RequiresPaymentMethod | IntentStatus::RequiresConfirmation | IntentStatus::RequiresAction
                    )
                });
                if open {
                    let abandoned = form([("cancellation_reason", "abandoned")])?;
                    let _ = self.cancel_intent(&pi.as_str(), &abandoned, attempt);
                }
            }
            let mut s = (**slot).clone();
            s.status = SessionStatus::Expired;
            *slot = Arc::new(s);
            self.events.emit(
                EventType::CheckoutSessionExpired,
                Reply::CheckoutSession(slot.clone()),
                None,
                attempt,
            );
            Ok(Reply::CheckoutSession(slot.clone()))
        })
    }

    /// The open sessions due to expire at the provider's time `now` (for the expiry sweep).
    pub fn sessions_due(&self, now: i64) -> Vec<CheckoutSessionId> {
        self.checkout_sessions
            .page(crate::state::table::Cursor::Start, usize::MAX - 1, |s| {
                s.status == SessionStatus::Open && s.due(now)
            })
            .items
            .iter()
            .map(|s| s.id)
            .collect()
    }

    /// `POST /__fauxpay/checkout/sessions/{id}/pay`: the customer pays with
    /// `payment_method` (a test id such as `pm_card_visa`, a saved `pm_…`, or a test
    /// card number) and, where the session has none, `email`. Answers the session, with
    /// its `payment_intent` expanded (so a 3-D Secure card's `requires_action` and
    /// `next_action` show), or the card's error (402).
    pub fn pay_checkout_session(&self, raw: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let id = CheckoutSessionId::parse(raw).ok_or_else(|| unknown_path(raw))?;
        let method = p
            .opt_str("payment_method")?
            .ok_or_else(|| ApiError::missing_param("payment_method"))?;
        let email = p.opt_str("email")?;
        if email.is_some_and(|e| e.len() > MAX_EMAIL || !e.contains('@')) {
            return Err(ApiError::invalid_param("email", "Invalid email address."));
        }
        let current = self.checkout_session(raw).ok_or_else(|| unknown_path(raw))?;
        if current.status != SessionStatus::Open {
            return Err(not_payable(&current));
        }
        let email = email.or(current.customer_email.as_deref()).map(str::to_owned);
        if email.is_none() && current.customer.is_none() {
            return Err(ApiError::missing_param("email"));
        }
        let for_session = Attempt {
            correlation_id: current.correlation_id.clone(),
            checkout_session: Some(id),
            key: KeyKind::CheckoutPage,
            ..attempt.clone()
        };
        self.checkout_sessions
            .update(&id, |slot| {
                if slot.status != SessionStatus::Open {
                    return Err(not_payable(slot));
                }
                let mut s = (**slot).clone();
                // Kept from the first pay, so a payment completed later (3-D Secure) has it.
                if let Some(e) = &email {
                    s.paid_email = Some(e.as_str().into());
                }
                let outcome = match s.mode {
                    SessionMode::Payment => self.pay_in_payment_mode(&mut s, method, email.as_deref(), &for_session),
                    SessionMode::Setup => self.pay_in_setup_mode(&mut s, method, &for_session),
                };
                *slot = Arc::new(s);
                if outcome.as_ref().is_ok_and(|&done| done) {
                    self.complete(slot, &for_session);
                }
                outcome.map(|_| ())
            })
            .unwrap_or_else(|| Err(unknown_path(raw)))
            .map_err(|e| e.executed())?;
        self.paid_view(&id)
    }

    /// Completes the open session in `slot` (held: its table's lock) and announces it.
    fn complete(&self, slot: &mut Arc<CheckoutSession>, attempt: &Attempt) {
        let mut s = (**slot).clone();
        s.status = SessionStatus::Complete;
        *slot = Arc::new(s);
        self.events.emit(
            EventType::CheckoutSessionCompleted,
            Reply::CheckoutSession(slot.clone()),
            None,
            attempt,
        );
    }

    /// The session as the customer's pay answers it: with its intent expanded, as the
    /// customer's browser may see it (the pay needs no key).
    fn paid_view(&self, id: &CheckoutSessionId) -> Result<Reply, ApiError> {
        let s = self
            .checkout_sessions
            .get(id)
            .ok_or_else(|| unknown_path(&id.as_str()))?;
        let mut json = s.to_json();
        if let Some(pi) = s.payment_intent.and_then(|pi| self.intents.get(&pi)) {
            json["payment_intent"] = pi.to_json();
            as_seen_by_publishable_key(&mut json["payment_intent"]);
        }
        if let Some(si) = s.setup_intent.and_then(|si| self.setup_intents.get(&si)) {
            json["setup_intent"] = si.to_json();
            as_seen_by_publishable_key(&mut json["setup_intent"]);
        }
        Ok(Reply::Json(Box::new(json)))
    }

    /// The parameters that name the customer's card: a test card number becomes
    /// `payment_method_data[card][number]`, anything else `payment_method`.
    fn card_pairs(method: &str) -> Vec<(&'static str, String)> {
        let digits: String = method.chars().filter(|c| !matches!(c, ' ' | '-')).collect();
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            vec![
                ("payment_method_data[type]", "card".into()),
                ("payment_method_data[card][number]", digits),
            ]
        } else {
            vec![("payment_method", method.to_owned())]
        }
    }

    /// Where the 3-D Secure page sends the customer back: the session's page.
    fn return_url(s: &CheckoutSession) -> Option<String> {
        s.origin.as_deref().map(|o| format!("{o}{PAGE_PATH}{}", s.id))
    }

    /// Pays a payment-mode session: makes its intent (first pay) or confirms it again;
    /// `Ok(true)` when the payment succeeded (or was authorised, with manual capture).
    fn pay_in_payment_mode(
        &self,
        s: &mut CheckoutSession,
        method: &str,
        email: Option<&str>,
        attempt: &Attempt,
    ) -> Result<bool, ApiError> {
        let mut pairs = Self::card_pairs(method);
        if let Some(url) = Self::return_url(s) {
            pairs.push(("return_url", url));
        }
        let pay_error = |e: ApiError| {
            let mut e = e;
            if e.param.as_deref().is_some_and(|p| p.starts_with("payment_method")) {
                e.param = Some("payment_method".into());
            }
            e
        };
        let result = match s.payment_intent {
            // The customer left a 3-D Secure challenge: the answer sends them back to it.
            Some(pi)
                if self
                    .intents
                    .get(&pi)
                    .is_some_and(|i| i.status == IntentStatus::RequiresAction) =>
            {
                return Ok(false)
            }
            Some(pi) => {
                let params = form(pairs)?;
                self.confirm_intent_only(&pi.as_str(), &params, attempt)
            }
            None => {
                if s.customer.is_none() && s.customer_creation == Some("always") {
                    let made = self.create_customer(&form([("email", email.unwrap_or(""))])?, attempt)?;
                    if let Reply::Customer(c) = made {
                        s.customer = Some(c.id);
                    }
                }
                let d = &s.intent_data;
                let amount = s.amount_total().to_string();
                let currency = s.currency.map_or("usd", |c| c.code());
                pairs.extend([
                    ("amount", amount),
                    ("currency", currency.to_owned()),
                    ("confirm", "true".into()),
                ]);
                if let Some(desc) = d.description.as_deref() {
                    pairs.push(("description", desc.into()));
                }
                if d.manual_capture {
                    pairs.push(("capture_method", "manual".into()));
                }
                if let Some(u) = d.setup_future_usage {
                    pairs.push(("setup_future_usage", u.into()));
                }
                if let Some(c) = s.customer {
                    pairs.push(("customer", c.to_string()));
                }
                if let Some(e) = email {
                    pairs.push(("receipt_email", e.into()));
                }
                let metadata = d
                    .metadata
                    .iter()
                    .map(|(k, v)| (format!("metadata[{k}]"), v.to_string()));
                let params = form(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).chain(metadata))?;
                let made = self.create_intent(&params, attempt);
                // The intent exists once the customer tried to pay, declined or not.
                s.payment_intent = match &made {
                    Ok(Reply::Intent(pi)) => Some(pi.id),
                    Ok(_) => None,
                    Err(e) => id_in_error(e, "payment_intent").and_then(crate::stripe::ids::PaymentIntentId::parse),
                };
                made
            }
        };
        match result.map_err(pay_error)? {
            Reply::Intent(pi) => Ok(matches!(
                pi.status,
                IntentStatus::Succeeded | IntentStatus::RequiresCapture
            )),
            _ => Ok(false),
        }
    }

    /// Pays a setup-mode session: saves the card through a setup intent (to the session's
    /// customer, when it has one); `Ok(true)` when it succeeded.
    fn pay_in_setup_mode(&self, s: &mut CheckoutSession, method: &str, attempt: &Attempt) -> Result<bool, ApiError> {
        let pm = match Self::card_pairs(method).as_slice() {
            [(_, pm)] => pm.clone(),
            _ => {
                let number = method.chars().filter(|c| c.is_ascii_digit()).collect::<String>();
                let year = (crate::state::clock::now_unix() / 31_556_952 + 1970 + 3).to_string();
                let made = self.create_payment_method(&form([
                    ("type", "card"),
                    ("card[number]", &number),
                    ("card[exp_month]", "12"),
                    ("card[exp_year]", &year),
                ])?)?;
                match made {
                    Reply::PaymentMethod(pm) => pm.id.to_string(),
                    _ => return Ok(false),
                }
            }
        };
        let mut pairs = vec![("payment_method", pm)];
        if let Some(url) = Self::return_url(s) {
            pairs.push(("return_url", url));
        }
        if let Some(si) = s.setup_intent {
            // A card that failed before: the same setup intent, with the new card.
            let params = form(pairs)?;
            return match self.confirm_setup_intent(&si.as_str(), &params, attempt)? {
                Reply::SetupIntent(si) => Ok(si.status == SetupStatus::Succeeded),
                _ => Ok(false),
            };
        }
        pairs.push(("confirm", "true".to_owned()));
        if let Some(c) = s.customer {
            pairs.push(("customer", c.to_string()));
        }
        let params = form(pairs)?;
        let made = self.create_setup_intent(&params, attempt);
        s.setup_intent = match &made {
            Ok(Reply::SetupIntent(si)) => Some(si.id),
            Ok(_) => None,
            Err(e) => id_in_error(e, "setup_intent").and_then(crate::stripe::ids::SetupIntentId::parse),
        };
        match made {
            Ok(Reply::SetupIntent(si)) => Ok(si.status == SetupStatus::Succeeded),
            Ok(_) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Completes the session an intent was made for, once the intent's payment went
    /// through outside the session's pay (a 3-D Secure challenge passed, a confirmation
    /// with the publishable key). Called with no intent lock held.
    pub(crate) fn complete_session_of(&self, session: Option<CheckoutSessionId>, paid: bool, attempt: &Attempt) {
        let Some(id) = session.filter(|_| paid) else { return };
        self.checkout_sessions.update(&id, |slot| {
            if slot.status == SessionStatus::Open {
                self.complete(slot, attempt);
            }
        });
    }

    /// The session (if any) a setup intent was made for.
    pub(crate) fn session_of_setup_intent(&self, si: crate::stripe::ids::SetupIntentId) -> Option<CheckoutSessionId> {
        self.checkout_sessions
            .page(crate::state::table::Cursor::Start, 1, |s| s.setup_intent == Some(si))
            .items
            .first()
            .map(|s| s.id)
    }
}

/// `payment_intent_data`: `description`, `metadata`, `capture_method`,
/// `setup_future_usage`.
fn intent_data(d: &Object<'_>) -> Result<IntentData, ApiError> {
    let manual_capture = match d.opt_str("capture_method")? {
        None | Some("automatic" | "automatic_async") => false,
        Some("manual") => true,
        Some(other) => {
            return Err(ApiError::invalid_param(
                "capture_method",
                format!("Invalid capture_method: '{other}'; expected automatic, automatic_async or manual."),
            ))
        }
    };
    let setup_future_usage = match d.opt_str("setup_future_usage")? {
        None => None,
        Some("on_session") => Some("on_session"),
        Some("off_session") => Some("off_session"),
        Some(other) => {
            return Err(ApiError::invalid_param(
                "setup_future_usage",
                format!("Invalid setup_future_usage: must be on_session or off_session (got {other})."),
            ))
        }
    };
    Ok(IntentData {
        description: d.opt_str("description")?.map(Into::into),
        metadata: metadata_in(d.opt_object("metadata")?, "metadata")?,
        manual_capture,
        setup_future_usage,
    })
}
