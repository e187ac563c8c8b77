//! Customers: create (optionally saving a `payment_method` and choosing
//! `invoice_settings[default_payment_method]`), retrieve, update, delete, list
//! (`email`, `created`, pagination) and search (`email`, `name`, `phone`, `created`,
//! `metadata`); and what a `customer` parameter elsewhere names.
//!
//! A deleted customer stays in the table: retrieving it answers Stripe's
//! `deleted_customer`; everything else treats it as unknown (`resource_missing`), and
//! lists and searches skip it.

use std::sync::Arc;

use super::object::{Customer, CustomerText};
use crate::error::ApiError;
use crate::fault_injection::attempt::Attempt;
use crate::reply::Reply;
use crate::resources::events::object::EventType;
use crate::state::clock::now_unix;
use crate::state::payments::Payments;
use crate::stripe::fields::{metadata, metadata_update, text_at_most, text_update, MAX_TEXT_LEN};
use crate::stripe::ids::{CustomerId, PaymentMethodId};
use crate::stripe::paging::{list_page, search_page_where, TimeRange};
use crate::stripe::params::Params;
use crate::stripe::search::Searchable;

const MAX_EMAIL: usize = 512;
const MAX_NAME: usize = 256;
const MAX_PHONE: usize = 20;

const DEFAULT_PM_PARAM: &str = "invoice_settings[default_payment_method]";

fn unknown_path(raw: &str) -> ApiError {
    ApiError::unknown_object("customer", raw, "customer")
}

/// `invoice_settings[default_payment_method]`, when sent: `Some(None)` when sent empty.
fn default_payment_method(p: &Params) -> Result<Option<Option<&str>>, ApiError> {
    let Some(settings) = p.opt_object("invoice_settings")? else {
        return Ok(None);
    };
    if settings.get("default_payment_method").is_none() {
        return Ok(None);
    }
    settings.opt_str("default_payment_method").map(Some).map_err(|_| {
        ApiError::invalid_param(
            DEFAULT_PM_PARAM,
            format!("Invalid string: {DEFAULT_PM_PARAM} must be a string."),
        )
    })
}

fn not_attached(raw: &str) -> ApiError {
    ApiError::invalid_request(
        format!("The customer does not have a payment method with the ID {raw}. The payment method must be attached to the customer."),
        Some(DEFAULT_PM_PARAM.into()),
    )
}

impl Payments {
    /// The customer `raw` names, if it exists and was not deleted.
    pub fn live_customer(&self, raw: &str) -> Option<Arc<Customer>> {
        CustomerId::parse(raw)
            .and_then(|id| self.customers.get(&id))
            .filter(|c| !c.deleted)
    }

    /// The `name` parameter as a customer reference: a live customer, or a 400
    /// `resource_missing` naming the parameter.
    pub fn customer_param(&self, p: &Params, name: &str) -> Result<Option<CustomerId>, ApiError> {
        match p.opt_str(name)? {
            None => Ok(None),
            Some(raw) => self
                .live_customer(raw)
                .map(|c| Some(c.id))
                .ok_or_else(|| ApiError::unknown_reference("customer", raw, name)),
        }
    }

    pub fn create_customer(&self, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let text = CustomerText {
            description: text_at_most(p, "description", MAX_TEXT_LEN)?,
            email: text_at_most(p, "email", MAX_EMAIL)?,
            name: text_at_most(p, "name", MAX_NAME)?,
            phone: text_at_most(p, "phone", MAX_PHONE)?,
        };
        let metadata = metadata(p)?;
        let pm_param = p.opt_str("payment_method")?;
        let named = match pm_param {
            None => None,
            Some(raw) => Some(
                self.named_payment_method(raw)
                    .ok_or_else(|| ApiError::unknown_reference("PaymentMethod", raw, "payment_method"))?,
            ),
        };
        // A new customer has no payment method but the one it is created with.
        let wants_default = match default_payment_method(p)? {
            None | Some(None) => false,
            Some(Some(d)) if Some(d) == pm_param => true,
            Some(Some(d)) => return Err(not_attached(d)),
        };
        let id = CustomerId::generate();
        let saved = match named {
            Some(named) => Some(self.attach(named, id, attempt)?.id),
            None => None,
        };
        let customer = Arc::new(Customer {
            id,
            created: now_unix(),
            text,
            metadata,
            default_payment_method: saved.filter(|_| wants_default),
            deleted: false,
        });
        self.customers.insert(customer.clone());
        self.events.emit(
            EventType::CustomerCreated,
            Reply::Customer(customer.clone()),
            None,
            attempt,
        );
        Ok(Reply::Customer(customer))
    }

    /// A customer, or Stripe's `deleted_customer` once deleted.
    pub fn retrieve_customer(&self, raw: &str) -> Result<Reply, ApiError> {
        CustomerId::parse(raw)
            .and_then(|id| self.customers.get(&id))
            .map(Reply::Customer)
            .ok_or_else(|| unknown_path(raw))
    }

    pub fn update_customer(&self, raw: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let current = self.live_customer(raw).ok_or_else(|| unknown_path(raw))?;
        let updates = [
            text_update(p, "description", MAX_TEXT_LEN)?,
            text_update(p, "email", MAX_EMAIL)?,
            text_update(p, "name", MAX_NAME)?,
            text_update(p, "phone", MAX_PHONE)?,
        ];
        let default = match default_payment_method(p)? {
            None => None,
            Some(None) => Some(None),
            Some(Some(d)) => {
                let owned = PaymentMethodId::parse(d)
                    .and_then(|id| self.payment_methods.get(&id))
                    .filter(|pm| pm.customer() == Some(current.id));
                Some(Some(owned.ok_or_else(|| not_attached(d))?.id))
            }
        };
        self.update_announced(
            &self.customers,
            &current.id,
            EventType::CustomerUpdated,
            Reply::Customer,
            attempt,
            |c| {
                if c.deleted {
                    return Err(unknown_path(raw));
                }
                let t = &mut c.text;
                let [description, email, name, phone] = updates;
                for (slot, update) in [
                    (&mut t.description, description),
                    (&mut t.email, email),
                    (&mut t.name, name),
                    (&mut t.phone, phone),
                ] {
                    if let Some(v) = update {
                        *slot = v;
                    }
                }
                c.metadata = metadata_update(&c.metadata, p)?;
                if let Some(d) = default {
                    c.default_payment_method = d;
                }
                Ok(())
            },
        )
        .unwrap_or_else(|| Err(unknown_path(raw)))
    }

    /// Deletes a customer: answers `{"id","object":"customer","deleted":true}`.
    pub fn delete_customer(&self, raw: &str, attempt: &Attempt) -> Result<Reply, ApiError> {
        let id = CustomerId::parse(raw).ok_or_else(|| unknown_path(raw))?;
        self.customers
            .update(&id, |slot| {
                if slot.deleted {
                    return Err(unknown_path(raw));
                }
                let mut c = (**slot).clone();
                c.deleted = true;
                // `customer.deleted` carries the customer as it was.
                let before = std::mem::replace(slot, Arc::new(c));
                self.events
                    .emit(EventType::CustomerDeleted, Reply::Customer(before), None, attempt);
                Ok(Reply::Customer(slot.clone()))
            })
            .unwrap_or_else(|| Err(unknown_path(raw)))
    }

    /// Clears `customer`'s default payment method if it is `pm` (which was detached).
    pub fn forget_default_payment_method(&self, customer: CustomerId, pm: PaymentMethodId) {
        self.customers.update(&customer, |slot| {
            if slot.default_payment_method == Some(pm) {
                let mut c = (**slot).clone();
                c.default_payment_method = None;
                *slot = Arc::new(c);
            }
        });
    }

    pub fn list_customers(&self, p: &Params) -> Result<Reply, ApiError> {
        let email = p.opt_str("email")?;
        let created = TimeRange::of(p, "created")?;
        list_page(
            &self.customers,
            p,
            "/v1/customers",
            CustomerId::parse,
            |c| !c.deleted && created.contains(c.created) && email.is_none_or(|e| c.email() == Some(e)),
            |c| c.to_json(),
        )
    }

    pub fn search_customers(&self, p: &Params) -> Result<Reply, ApiError> {
        search_page_where(
            &self.customers,
            p,
            "/v1/customers/search",
            |c| !c.deleted,
            |c| c.to_json(),
        )
    }
}

impl Searchable for Customer {
    fn field(&self, name: &str) -> Option<String> {
        match name {
            "email" => self.text.email.as_deref().map(str::to_string),
            "name" => self.text.name.as_deref().map(str::to_string),
            "phone" => self.text.phone.as_deref().map(str::to_string),
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
    use serde_json::{json, Value};

    use super::*;
    use crate::test_support::{attempt, form, payments};

    fn ids(list: &Value) -> Vec<&str> {
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn create_retrieve_update() {
        let p = payments();
        let c = p
            .create_customer(
                &form("email=jenny@example.com&name=Jenny&phone=%2B15555550100&description=d&metadata[tier]=gold"),
                &attempt(),
            )
            .unwrap()
            .json();
        let id = c["id"].as_str().unwrap();
        assert_eq!(
            (c["email"].as_str(), c["phone"].as_str()),
            (Some("jenny@example.com"), Some("+15555550100"))
        );
        assert_eq!(p.retrieve_customer(id).unwrap().json(), c);
        let up = p
            .update_customer(
                id,
                &form("name=&email=j@example.com&metadata[tier]=&metadata[vip]=yes"),
                &attempt(),
            )
            .unwrap()
            .json();
        assert_eq!(up["name"], Value::Null);
        assert_eq!(up["email"], "j@example.com");
        assert_eq!(up["description"], "d", "not sent: kept");
        assert_eq!(up["metadata"], json!({"vip": "yes"}));
        assert_eq!(
            p.update_customer("cus_nope", &form("name=x"), &attempt())
                .unwrap_err()
                .status
                .code(),
            404
        );
        let e = p
            .create_customer(&form(&format!("name={}", "n".repeat(257))), &attempt())
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("name"));
    }

    #[test]
    fn deleted_customers_retrieve_as_deleted_and_are_unknown_elsewhere() {
        let p = payments();
        let id = p.create_customer(&form("email=a@b.c"), &attempt()).unwrap().json()["id"]
            .as_str()
            .unwrap()
            .to_string();
        let gone = p.delete_customer(&id, &attempt()).unwrap().json();
        assert_eq!(gone, json!({"id": id, "object": "customer", "deleted": true}));
        assert_eq!(p.retrieve_customer(&id).unwrap().json(), gone);
        for e in [
            p.delete_customer(&id, &attempt()).unwrap_err(),
            p.update_customer(&id, &form("name=x"), &attempt()).unwrap_err(),
            p.list_customer_payment_methods(&id, &form("")).unwrap_err(),
        ] {
            assert_eq!((e.status.code(), e.code.as_deref()), (404, Some("resource_missing")));
        }
        let e = p
            .customer_param(&form(&format!("customer={id}")), "customer")
            .unwrap_err();
        assert_eq!((e.status.code(), e.param.as_deref()), (400, Some("customer")));
        assert!(ids(&p.list_customers(&form("")).unwrap().json()).is_empty());
        assert!(ids(&p.search_customers(&form("query=-email:'x'")).unwrap().json()).is_empty());
    }

    #[test]
    fn list_filters_and_search() {
        let p = payments();
        let a = p
            .create_customer(&form("email=a@x.io&name=Ann&metadata[plan]=pro"), &attempt())
            .unwrap()
            .json();
        let b = p
            .create_customer(&form("email=b@x.io&name=Bob"), &attempt())
            .unwrap()
            .json();
        let (a, b) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
        assert_eq!(ids(&p.list_customers(&form("")).unwrap().json()), [b, a]);
        assert_eq!(ids(&p.list_customers(&form("email=a@x.io")).unwrap().json()), [a]);
        assert_eq!(ids(&p.list_customers(&form("limit=1")).unwrap().json()), [b]);
        assert_eq!(
            ids(&p.list_customers(&form(&format!("starting_after={b}"))).unwrap().json()),
            [a]
        );
        let now = now_unix();
        assert_eq!(
            ids(&p
                .list_customers(&form(&format!("created[gt]={}", now + 5)))
                .unwrap()
                .json())
            .len(),
            0
        );
        assert_eq!(
            ids(&p
                .list_customers(&form(&format!("created[lte]={}", now + 5)))
                .unwrap()
                .json())
            .len(),
            2
        );
        let search = |q: &str| {
            let r = p.search_customers(&form(&format!("query={q}"))).unwrap().json();
            assert_eq!(r["object"], "search_result");
            ids(&r).into_iter().map(str::to_string).collect::<Vec<_>>()
        };
        assert_eq!(search("email:'a@x.io'"), [a]);
        assert_eq!(search("name:'Bob'"), [b]);
        assert_eq!(search("metadata['plan']:'pro'"), [a]);
        assert_eq!(search("name:'Ann' OR name:'Bob'"), [b, a]);
    }

    #[test]
    fn default_payment_method_must_be_the_customers() {
        let p = payments();
        let c = p
            .create_customer(
                &form("payment_method=pm_card_visa&invoice_settings[default_payment_method]=pm_card_visa"),
                &attempt(),
            )
            .unwrap()
            .json();
        let id = c["id"].as_str().unwrap();
        let default = c["invoice_settings"]["default_payment_method"].as_str().unwrap();
        assert!(
            default.starts_with("pm_") && default != "pm_card_visa",
            "the saved copy"
        );
        let pm = p.retrieve_payment_method(default).unwrap().json();
        assert_eq!(pm["customer"], id);

        let e = p
            .create_customer(
                &form("invoice_settings[default_payment_method]=pm_card_visa"),
                &attempt(),
            )
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some(DEFAULT_PM_PARAM));
        let other = p
            .create_payment_method(&form("type=card&card[token]=tok_visa"))
            .unwrap()
            .json();
        let other = other["id"].as_str().unwrap();
        let e = p
            .update_customer(
                id,
                &form(&format!("invoice_settings[default_payment_method]={other}")),
                &attempt(),
            )
            .unwrap_err();
        assert!(e.message.contains("does not have a payment method"), "{e}");
        p.attach_payment_method(other, &form(&format!("customer={id}")), &attempt())
            .unwrap();
        let up = p
            .update_customer(
                id,
                &form(&format!("invoice_settings[default_payment_method]={other}")),
                &attempt(),
            )
            .unwrap()
            .json();
        assert_eq!(up["invoice_settings"]["default_payment_method"], other);
        p.detach_payment_method(other, &attempt()).unwrap();
        let after = p.retrieve_customer(id).unwrap().json();
        assert_eq!(
            after["invoice_settings"]["default_payment_method"],
            Value::Null,
            "detaching forgets it"
        );
        let up = p
            .update_customer(
                id,
                &form(&format!("invoice_settings[default_payment_method]={default}")),
                &attempt(),
            )
            .unwrap()
            .json();
        assert_eq!(up["invoice_settings"]["default_payment_method"], default);
        let cleared = p
            .update_customer(id, &form("invoice_settings[default_payment_method]="), &attempt())
            .unwrap()
            .json();
        assert_eq!(cleared["invoice_settings"]["default_payment_method"], Value::Null);
        let e = p
            .create_customer(&form("payment_method=pm_nope"), &attempt())
            .unwrap_err();
        assert_eq!((e.status.code(), e.param.as_deref()), (400, Some("payment_method")));
    }
}
