//! Prices: create (for an existing `product`, or a new one from `product_data`),
//! retrieve, update (`active`, `metadata`, `nickname`, `lookup_key` with
//! `transfer_lookup_key`), list (`active`, `currency`, `product`, `type`, `lookup_keys`,
//! `recurring[interval]`, `created`) and search (`active`, `currency`, `product`,
//! `type`, `lookup_key`, `created`, `metadata`).
//!
//! A price's amount is per unit, in the currency's smallest unit, from 0 to Stripe's
//! largest amount; `unit_amount_decimal` is accepted when it is a whole number. A lookup
//! key names at most one price: another price claiming it is refused, unless it asks to
//! take it over (`transfer_lookup_key=true`).

use std::sync::Arc;

use super::object::{Interval, Price, Recurring};
use crate::error::ApiError;
use crate::fault_injection::attempt::Attempt;
use crate::reply::Reply;
use crate::resources::events::object::EventType;
use crate::state::clock::now_unix;
use crate::state::payments::Payments;
use crate::stripe::fields::{metadata, metadata_update, nested, text_at_most, text_update};
use crate::stripe::ids::{PriceId, ProductId};
use crate::stripe::money::{Currency, MAX_AMOUNT};
use crate::stripe::paging::{list_page, search_page, TimeRange};
use crate::stripe::params::{Kind, Object, Params};
use crate::stripe::search::Searchable;

const MAX_LOOKUP_KEY: usize = 200;
const MAX_NICKNAME: usize = 5_000;

fn unknown_path(raw: &str) -> ApiError {
    ApiError::unknown_object("price", raw, "price")
}

/// What a price is made of, read from a hash of price parameters (`POST /v1/prices`
/// itself, a product's `default_price_data`, a session line item's `price_data`).
pub(crate) struct PriceTerms {
    pub currency: Currency,
    pub unit_amount: u64,
    pub recurring: Option<Recurring>,
    pub tax_behavior: Option<Box<str>>,
}

impl PriceTerms {
    /// Reads the terms from `o`; errors name their parameter as it sits in `o` (the
    /// caller places them under the hash's own name).
    pub(crate) fn read(o: &Object<'_>) -> Result<Self, ApiError> {
        let currency = Currency::parse(o.req_str("currency")?)?;
        let unit_amount = match (o.opt_u64("unit_amount")?, o.opt_str("unit_amount_decimal")?) {
            (Some(n), _) => n,
            (None, Some(d)) => match d.split_once('.') {
                None => d.parse::<u64>().ok(),
                Some((whole, frac)) if frac.bytes().all(|b| b == b'0') => whole.parse::<u64>().ok(),
                Some(_) => None,
            }
            .ok_or_else(|| {
                ApiError::invalid_param(
                    "unit_amount_decimal",
                    "fauxpay accepts unit_amount_decimal only as a whole number of the currency's smallest unit.",
                )
            })?,
            (None, None) => return Err(ApiError::missing_param("unit_amount")),
        };
        if unit_amount > MAX_AMOUNT {
            return Err(ApiError::invalid_param(
                "unit_amount",
                format!("unit_amount must be no more than {MAX_AMOUNT} (in the currency's smallest unit)."),
            ));
        }
        let recurring = match o.opt_object("recurring")? {
            None => None,
            Some(r) => {
                let raw = r.req_str("interval").map_err(|e| nested("recurring", e))?;
                let interval = Interval::parse(raw).ok_or_else(|| {
                    ApiError::invalid_param(
                        "recurring[interval]",
                        format!("Invalid recurring[interval]: must be one of day, week, month or year (got {raw})."),
                    )
                })?;
                let count = r
                    .opt_u64("interval_count")
                    .map_err(|e| nested("recurring", e))?
                    .unwrap_or(1);
                let max = match interval {
                    Interval::Day => 1095,
                    Interval::Week => 156,
                    Interval::Month => 36,
                    Interval::Year => 3,
                };
                if count == 0 || count > max {
                    return Err(ApiError::invalid_param(
                        "recurring[interval_count]",
                        format!(
                            "The maximum billing frequency is 3 years: recurring[interval_count] must be between 1 and {max} for interval={}.",
                            interval.as_str()
                        ),
                    ));
                }
                Some(Recurring {
                    interval,
                    count: count as u16,
                })
            }
        };
        Ok(Self {
            currency,
            unit_amount,
            recurring,
            tax_behavior: o.opt_str("tax_behavior")?.map(Box::from),
        })
    }

    /// A new active price of `product` on these terms.
    pub(crate) fn price(self, product: ProductId) -> Price {
        Price {
            id: PriceId::generate(),
            product,
            created: now_unix(),
            active: true,
            currency: self.currency,
            unit_amount: self.unit_amount,
            recurring: self.recurring,
            lookup_key: None,
            nickname: None,
            tax_behavior: self.tax_behavior,
            metadata: Default::default(),
            inline: false,
        }
    }
}

/// The strings of a list parameter (`lookup_keys[]=a&lookup_keys[]=b`).
pub(crate) fn str_list<'a>(p: &'a Params, name: &str) -> Result<Option<Vec<&'a str>>, ApiError> {
    match p.get(name).map(|v| v.kind()) {
        None => Ok(None),
        Some(Kind::List(items)) => items
            .iter()
            .map(|i| {
                i.as_str().ok_or_else(|| {
                    ApiError::invalid_param(name, format!("Invalid array: {name} must be a list of strings."))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(ApiError::invalid_param(
            name,
            format!("Invalid array: {name} must be a list (e.g. {name}[]=value)."),
        )),
    }
}

impl Payments {
    /// The price `raw` names, if it exists.
    pub fn price(&self, raw: &str) -> Option<Arc<Price>> {
        PriceId::parse(raw).and_then(|id| self.prices.get(&id))
    }

    /// The price other than `price` that holds lookup key `key`.
    fn lookup_key_holder(&self, key: &str, price: PriceId) -> Option<Arc<Price>> {
        self.prices
            .page(crate::state::table::Cursor::Start, 1, |p| {
                p.id != price && p.lookup_key.as_deref() == Some(key)
            })
            .items
            .pop()
    }

    /// Whether `price` may take `key`: free, or held by another price and `transfer`
    /// asked for; else a 400 naming `lookup_key`.
    fn check_lookup_key(&self, key: &str, price: PriceId, transfer: bool) -> Result<(), ApiError> {
        match self.lookup_key_holder(key, price) {
            Some(holder) if !transfer => Err(ApiError::invalid_param(
                "lookup_key",
                format!(
                    "A price ({}) already uses that lookup key. Pass transfer_lookup_key=true to move it to this price.",
                    holder.id
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Takes `key` for `price` (no other price may hold it): with `transfer`, from the
    /// price that holds it (announced as updated), else a 400 naming `lookup_key`.
    fn claim_lookup_key(&self, key: &str, price: PriceId, transfer: bool, attempt: &Attempt) -> Result<(), ApiError> {
        self.check_lookup_key(key, price, transfer)?;
        let Some(holder) = self.lookup_key_holder(key, price) else {
            return Ok(());
        };
        self.update_announced(
            &self.prices,
            &holder.id,
            EventType::PriceUpdated,
            Reply::Price,
            attempt,
            |p| {
                p.lookup_key = None;
                Ok(())
            },
        );
        Ok(())
    }

    pub fn create_price(&self, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let terms = PriceTerms::read(&p.object())?;
        let metadata = metadata(p)?;
        let nickname = text_at_most(p, "nickname", MAX_NICKNAME)?;
        let lookup_key = text_at_most(p, "lookup_key", MAX_LOOKUP_KEY)?;
        let transfer = p.opt_bool("transfer_lookup_key")?.unwrap_or(false);
        let active = p.opt_bool("active")?.unwrap_or(true);
        // Every check before anything is made (the product of `product_data`).
        let id = PriceId::generate();
        if let Some(key) = lookup_key.as_deref() {
            self.check_lookup_key(key, id, transfer)?;
        }
        let product = match (p.opt_str("product")?, p.opt_object("product_data")?) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid_param(
                    "product_data",
                    "You may only specify one of these parameters: product, product_data.",
                ))
            }
            (Some(raw), None) => self
                .live_product(raw)
                .ok_or_else(|| ApiError::unknown_reference("product", raw, "product"))?
                .id
                .clone(),
            (None, Some(data)) => self.product_from_data(&data, "product_data", attempt)?.id.clone(),
            (None, None) => {
                return Err(ApiError::invalid_request(
                    "You must specify either `product` or `product_data` when creating a price.",
                    Some("product".into()),
                ))
            }
        };
        let mut price = terms.price(product);
        price.id = id;
        price.active = active;
        price.metadata = metadata;
        price.nickname = nickname;
        if let Some(key) = lookup_key.as_deref() {
            self.claim_lookup_key(key, price.id, transfer, attempt)?;
        }
        price.lookup_key = lookup_key;
        let price = Arc::new(price);
        self.prices.insert(price.clone());
        self.events
            .emit(EventType::PriceCreated, Reply::Price(price.clone()), None, attempt);
        Ok(Reply::Price(price))
    }

    pub fn retrieve_price(&self, raw: &str) -> Result<Reply, ApiError> {
        self.price(raw).map(Reply::Price).ok_or_else(|| unknown_path(raw))
    }

    pub fn update_price(&self, raw: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let current = self.price(raw).ok_or_else(|| unknown_path(raw))?;
        let active = p.opt_bool("active")?;
        let nickname = text_update(p, "nickname", MAX_NICKNAME)?;
        let lookup_key = text_update(p, "lookup_key", MAX_LOOKUP_KEY)?;
        let tax_behavior = p.opt_str("tax_behavior")?;
        if let Some(Some(key)) = lookup_key.as_ref() {
            let transfer = p.opt_bool("transfer_lookup_key")?.unwrap_or(false);
            self.claim_lookup_key(key, current.id, transfer, attempt)?;
        }
        self.update_announced(
            &self.prices,
            &current.id,
            EventType::PriceUpdated,
            Reply::Price,
            attempt,
            |price| {
                if let Some(a) = active {
                    price.active = a;
                }
                if let Some(n) = nickname {
                    price.nickname = n;
                }
                if let Some(k) = lookup_key {
                    price.lookup_key = k;
                }
                if let Some(t) = tax_behavior {
                    price.tax_behavior = Some(t.into());
                }
                price.metadata = metadata_update(&price.metadata, p)?;
                Ok(())
            },
        )
        .unwrap_or_else(|| Err(unknown_path(raw)))
    }

    pub fn list_prices(&self, p: &Params) -> Result<Reply, ApiError> {
        let active = p.opt_bool("active")?;
        let currency = p.opt_str("currency")?;
        let product = p.opt_str("product")?;
        let kind = p.opt_str("type")?;
        let lookup_keys = str_list(p, "lookup_keys")?;
        let interval = match p.opt_object("recurring")? {
            Some(r) => r.opt_str("interval").map_err(|e| nested("recurring", e))?,
            None => None,
        };
        let created = TimeRange::of(p, "created")?;
        list_page(
            &self.prices,
            p,
            "/v1/prices",
            PriceId::parse,
            |pr| {
                created.contains(pr.created)
                    && active.is_none_or(|a| pr.active == a)
                    && currency.is_none_or(|c| pr.currency.code() == c)
                    && product.is_none_or(|x| pr.product.as_str() == x)
                    && kind.is_none_or(|k| pr.kind() == k)
                    && interval.is_none_or(|i| pr.recurring.is_some_and(|r| r.interval.as_str() == i))
                    && lookup_keys
                        .as_ref()
                        .is_none_or(|keys| pr.lookup_key.as_deref().is_some_and(|k| keys.contains(&k)))
            },
            |pr| pr.to_json(),
        )
    }

    pub fn search_prices(&self, p: &Params) -> Result<Reply, ApiError> {
        search_page(&self.prices, p, "/v1/prices/search", |pr| pr.to_json())
    }
}

impl Searchable for Price {
    fn field(&self, name: &str) -> Option<String> {
        match name {
            "active" => Some(self.active.to_string()),
            "currency" => Some(self.currency.code().into()),
            "product" => Some(self.product.to_string()),
            "type" => Some(self.kind().into()),
            "lookup_key" => self.lookup_key.as_deref().map(Into::into),
            "created" => Some(self.created.to_string()),
            _ => None,
        }
    }
    fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata.get(key)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use crate::test_support::{attempt, form, payments};

    fn id(v: &Value) -> &str {
        v["id"].as_str().unwrap()
    }

    #[test]
    fn a_price_for_a_product_or_from_product_data() {
        let p = payments();
        let price = p
            .create_price(
                &form("currency=usd&unit_amount=1999&product_data[name]=T-shirt&lookup_key=tee"),
                &attempt(),
            )
            .unwrap()
            .json();
        assert_eq!(
            (price["type"].as_str(), price["unit_amount"].as_u64()),
            (Some("one_time"), Some(1999))
        );
        let product = price["product"].as_str().unwrap();
        assert!(product.starts_with("prod_"));
        assert_eq!(p.retrieve_product(product).unwrap().json()["name"], "T-shirt");
        let monthly = p
            .create_price(
                &form(&format!(
                    "currency=usd&unit_amount=500&product={product}&recurring[interval]=month"
                )),
                &attempt(),
            )
            .unwrap()
            .json();
        assert_eq!(monthly["type"], "recurring");
        assert_eq!(monthly["recurring"]["interval"], "month");

        for (body, param) in [
            ("currency=usd&unit_amount=1", "product"),
            ("currency=usd&unit_amount=1&product=prod_nope", "product"),
            ("currency=usd&product_data[name]=x", "unit_amount"),
            ("currency=usd&unit_amount=1&product_data[name]=x&recurring[interval]=month&recurring[interval_count]=37", "recurring[interval_count]"),
            ("currency=usd&unit_amount_decimal=1.5&product_data[name]=x", "unit_amount_decimal"),
        ] {
            let e = p.create_price(&form(body), &attempt()).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{body}: {e}");
        }
        let e = p
            .create_price(
                &form(&format!("currency=usd&unit_amount=1&product={product}&lookup_key=tee")),
                &attempt(),
            )
            .unwrap_err();
        assert!(e.message.contains("already uses that lookup key"), "{e}");
        let moved = p
            .create_price(
                &form(&format!(
                    "currency=usd&unit_amount=1&product={product}&lookup_key=tee&transfer_lookup_key=true"
                )),
                &attempt(),
            )
            .unwrap()
            .json();
        assert_eq!(moved["lookup_key"], "tee");
        assert_eq!(p.retrieve_price(id(&price)).unwrap().json()["lookup_key"], Value::Null);
    }

    #[test]
    fn list_filters_search_and_update() {
        let p = payments();
        let a = p
            .create_price(
                &form("currency=usd&unit_amount=100&product_data[name]=A&lookup_key=a"),
                &attempt(),
            )
            .unwrap()
            .json();
        let b = p
            .create_price(
                &form("currency=eur&unit_amount=200&product_data[name]=B&recurring[interval]=year&metadata[tier]=pro"),
                &attempt(),
            )
            .unwrap()
            .json();
        let ids = |q: &str| -> Vec<String> {
            p.list_prices(&form(q)).unwrap().json()["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| id(x).to_string())
                .collect()
        };
        assert_eq!(ids(""), [id(&b), id(&a)]);
        assert_eq!(ids("currency=usd"), [id(&a)]);
        assert_eq!(ids("type=recurring"), [id(&b)]);
        assert_eq!(ids("lookup_keys[]=a&lookup_keys[]=zzz"), [id(&a)]);
        assert_eq!(ids("recurring[interval]=year"), [id(&b)]);
        let found = p.search_prices(&form("query=metadata['tier']:'pro'")).unwrap().json();
        assert_eq!(id(&found["data"][0]), id(&b));
        let up = p
            .update_price(id(&a), &form("active=false&nickname=old&metadata[k]=v"), &attempt())
            .unwrap()
            .json();
        assert_eq!(
            (up["active"].as_bool(), up["nickname"].as_str()),
            (Some(false), Some("old"))
        );
        assert_eq!(ids("active=true"), [id(&b)]);
        assert_eq!(
            p.update_price("price_nope", &form(""), &attempt())
                .unwrap_err()
                .status
                .code(),
            404
        );
    }
}
