//! Products: create (with a chosen `id`, and a default price from
//! `default_price_data`), retrieve, update (its default price must be one of its own
//! prices), delete (refused while it has prices, as at Stripe), list (`active`, `ids`,
//! `shippable`, `url`, `created`) and search (`name`, `active`, `description`, `url`,
//! `created`, `metadata`).
//!
//! A deleted product stays in the table (its id stays taken), unknown to everything
//! else; lists and searches skip it.

use std::sync::Arc;

use super::object::{Product, ProductText};
use crate::error::ApiError;
use crate::fault_injection::attempt::Attempt;
use crate::reply::Reply;
use crate::resources::events::object::EventType;
use crate::resources::prices::rules::{str_list, PriceTerms};
use crate::state::clock::now_unix;
use crate::state::payments::Payments;
use crate::state::table::Cursor;
use crate::stripe::fields::{metadata_in, metadata_update, nested};
use crate::stripe::ids::ProductId;
use crate::stripe::paging::{list_page, search_page_where, TimeRange};
use crate::stripe::params::{Kind, Object, Params};
use crate::stripe::search::Searchable;

const MAX_NAME: usize = 250;
const MAX_STATEMENT_DESCRIPTOR: usize = 22;
const MAX_UNIT_LABEL: usize = 12;
const MAX_URL: usize = 5_000;
const MAX_IMAGES: usize = 8;

fn unknown_path(raw: &str) -> ApiError {
    ApiError::unknown_object("product", raw, "id")
}

fn already_exists() -> ApiError {
    ApiError::invalid_param("id", "Product already exists.").with_code("resource_already_exists")
}

/// An optional string of `o` of at most `max` characters.
fn bounded<'a>(o: &Object<'a>, name: &str, max: usize) -> Result<Option<&'a str>, ApiError> {
    match o.opt_str(name)? {
        Some(s) if s.chars().count() > max => Err(ApiError::invalid_param(
            name,
            format!("{name} can be at most {max} characters."),
        )),
        other => Ok(other),
    }
}

/// `images` of `o`: at most eight URLs.
fn images(o: &Object<'_>) -> Result<Option<Box<[Box<str>]>>, ApiError> {
    match o.get("images").map(|v| v.kind()) {
        None => Ok(None),
        Some(Kind::String("")) => Ok(Some(Box::new([]))),
        Some(Kind::List(items)) if items.len() <= MAX_IMAGES => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(Box::from)
                    .ok_or_else(|| ApiError::invalid_param("images", "Invalid array: images must be a list of URLs."))
            })
            .collect::<Result<Box<[_]>, _>>()
            .map(Some),
        Some(_) => Err(ApiError::invalid_param(
            "images",
            format!("images must be a list of at most {MAX_IMAGES} URLs."),
        )),
    }
}

impl Payments {
    /// The product `raw` names, if it exists and was not deleted.
    pub fn live_product(&self, raw: &str) -> Option<Arc<Product>> {
        ProductId::parse(raw)
            .and_then(|id| self.products.get(&id))
            .filter(|p| !p.deleted)
    }

    /// A new product read from a hash of product parameters (`POST /v1/products`
    /// itself, `product_data`), not stored yet; its `default_price_data` is not read here.
    pub(crate) fn new_product(&self, o: &Object<'_>) -> Result<Product, ApiError> {
        let id = match o.opt_str("id")? {
            None => ProductId::generate(),
            Some(raw) => {
                let id = ProductId::parse(raw)
                    .ok_or_else(|| ApiError::invalid_param("id", "A product id must be 1 to 255 characters."))?;
                if self.products.get(&id).is_some() {
                    return Err(already_exists());
                }
                id
            }
        };
        let now = now_unix();
        Ok(Product {
            id,
            created: now,
            updated: now,
            active: o.opt_bool("active")?.unwrap_or(true),
            text: ProductText {
                name: bounded(o, "name", MAX_NAME)?
                    .ok_or_else(|| ApiError::missing_param("name"))?
                    .into(),
                description: bounded(o, "description", 40_000)?.map(Into::into),
                statement_descriptor: bounded(o, "statement_descriptor", MAX_STATEMENT_DESCRIPTOR)?.map(Into::into),
                unit_label: bounded(o, "unit_label", MAX_UNIT_LABEL)?.map(Into::into),
                url: bounded(o, "url", MAX_URL)?.map(Into::into),
            },
            images: images(o)?.unwrap_or_default(),
            shippable: o.opt_bool("shippable")?,
            metadata: metadata_in(o.opt_object("metadata")?, "metadata")?,
            default_price: None,
            deleted: false,
            inline: false,
        })
    }

    /// A new product from a hash of product parameters at `name` (`POST /v1/products`
    /// itself with `name` empty, or `product_data`), stored and announced, with its
    /// default price when it has `default_price_data`.
    pub(crate) fn product_from_data(
        &self,
        o: &Object<'_>,
        name: &str,
        attempt: &Attempt,
    ) -> Result<Arc<Product>, ApiError> {
        let at = |e: ApiError| if name.is_empty() { e } else { nested(name, e) };
        let mut product = self.new_product(o).map_err(at)?;
        let default_terms = match o.opt_object("default_price_data").map_err(at)? {
            None => None,
            Some(d) => Some(PriceTerms::read(&d).map_err(|e| at(nested("default_price_data", e)))?),
        };
        let price = default_terms.map(|t| Arc::new(t.price(product.id.clone())));
        product.default_price = price.as_ref().map(|p| p.id);
        let product = Arc::new(product);
        // A concurrent create of the same chosen id: the first one stands.
        if !self.products.insert_new(product.clone()) {
            return Err(at(already_exists()));
        }
        self.events.emit(
            EventType::ProductCreated,
            Reply::Product(product.clone()),
            None,
            attempt,
        );
        if let Some(price) = price {
            self.prices.insert(price.clone());
            self.events
                .emit(EventType::PriceCreated, Reply::Price(price), None, attempt);
        }
        Ok(product)
    }

    pub fn create_product(&self, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        self.product_from_data(&p.object(), "", attempt).map(Reply::Product)
    }

    /// A product (a deleted one is unknown, as at Stripe).
    pub fn retrieve_product(&self, raw: &str) -> Result<Reply, ApiError> {
        self.live_product(raw)
            .map(Reply::Product)
            .ok_or_else(|| unknown_path(raw))
    }

    pub fn update_product(&self, raw: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let current = self.live_product(raw).ok_or_else(|| unknown_path(raw))?;
        let o = p.object();
        let name = match p.get("name") {
            None => None,
            Some(_) => Some(
                bounded(&o, "name", MAX_NAME)?
                    .ok_or_else(|| ApiError::invalid_param("name", "You cannot unset a product's name."))?,
            ),
        };
        let texts = [
            ("description", 40_000),
            ("statement_descriptor", MAX_STATEMENT_DESCRIPTOR),
            ("unit_label", MAX_UNIT_LABEL),
            ("url", MAX_URL),
        ]
        .map(|(field, max)| {
            p.contains(field)
                .then(|| bounded(&o, field, max).map(|v| v.map(Box::<str>::from)))
                .transpose()
        });
        let [description, statement_descriptor, unit_label, url] = texts;
        let (description, statement_descriptor, unit_label, url) =
            (description?, statement_descriptor?, unit_label?, url?);
        let images = images(&o)?;
        let active = p.opt_bool("active")?;
        let shippable = p.opt_bool("shippable")?;
        let default_price = match p.opt_str("default_price")? {
            None => None,
            Some(raw) => {
                let price = self
                    .price(raw)
                    .filter(|pr| pr.product == current.id)
                    .ok_or_else(|| ApiError::unknown_reference("price", raw, "default_price"))?;
                if !price.active {
                    return Err(ApiError::invalid_param(
                        "default_price",
                        "The default price of a product must be active.",
                    ));
                }
                Some(price.id)
            }
        };
        self.update_announced(
            &self.products,
            &current.id,
            EventType::ProductUpdated,
            Reply::Product,
            attempt,
            |prod| {
                if prod.deleted {
                    return Err(unknown_path(raw));
                }
                let t = &mut prod.text;
                if let Some(n) = name {
                    t.name = n.into();
                }
                for (slot, v) in [
                    (&mut t.description, description),
                    (&mut t.statement_descriptor, statement_descriptor),
                    (&mut t.unit_label, unit_label),
                    (&mut t.url, url),
                ] {
                    if let Some(v) = v {
                        *slot = v;
                    }
                }
                if let Some(i) = images {
                    prod.images = i;
                }
                if let Some(a) = active {
                    prod.active = a;
                }
                if shippable.is_some() {
                    prod.shippable = shippable;
                }
                if let Some(d) = default_price {
                    prod.default_price = Some(d);
                }
                prod.metadata = metadata_update(&prod.metadata, p)?;
                prod.updated = now_unix();
                Ok(())
            },
        )
        .unwrap_or_else(|| Err(unknown_path(raw)))
    }

    /// Deletes a product that has no prices (Stripe refuses otherwise).
    pub fn delete_product(&self, raw: &str, attempt: &Attempt) -> Result<Reply, ApiError> {
        let current = self.live_product(raw).ok_or_else(|| unknown_path(raw))?;
        let has_prices = !self
            .prices
            .page(Cursor::Start, 1, |pr| pr.product == current.id)
            .items
            .is_empty();
        if has_prices {
            return Err(ApiError::invalid_request(
                "This product cannot be deleted because it has one or more user-created prices.",
                None,
            ));
        }
        self.products
            .update(&current.id, |slot| {
                if slot.deleted {
                    return Err(unknown_path(raw));
                }
                let mut gone = (**slot).clone();
                gone.deleted = true;
                *slot = Arc::new(gone);
                self.events.emit(
                    EventType::ProductDeleted,
                    Reply::Product(current.clone()),
                    None,
                    attempt,
                );
                Ok(Reply::Product(slot.clone()))
            })
            .unwrap_or_else(|| Err(unknown_path(raw)))
    }

    pub fn list_products(&self, p: &Params) -> Result<Reply, ApiError> {
        let active = p.opt_bool("active")?;
        let shippable = p.opt_bool("shippable")?;
        let url = p.opt_str("url")?;
        let ids = str_list(p, "ids")?;
        let created = TimeRange::of(p, "created")?;
        list_page(
            &self.products,
            p,
            "/v1/products",
            ProductId::parse,
            |pr| {
                !pr.deleted
                    && created.contains(pr.created)
                    && active.is_none_or(|a| pr.active == a)
                    && shippable.is_none_or(|s| pr.shippable == Some(s))
                    && url.is_none_or(|u| pr.text.url.as_deref() == Some(u))
                    && ids.as_ref().is_none_or(|ids| ids.contains(&pr.id.as_str()))
            },
            |pr| pr.to_json(),
        )
    }

    pub fn search_products(&self, p: &Params) -> Result<Reply, ApiError> {
        search_page_where(
            &self.products,
            p,
            "/v1/products/search",
            |pr| !pr.deleted,
            |pr| pr.to_json(),
        )
    }
}

impl Searchable for Product {
    fn field(&self, name: &str) -> Option<String> {
        match name {
            "name" => Some(self.text.name.to_string()),
            "active" => Some(self.active.to_string()),
            "description" => self.text.description.as_deref().map(Into::into),
            "url" => self.text.url.as_deref().map(Into::into),
            "shippable" => self.shippable.map(|s| s.to_string()),
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

    use crate::test_support::{attempt, form, payments};

    #[test]
    fn create_with_a_default_price_update_and_delete() {
        let p = payments();
        let prod = p
            .create_product(
                &form(
                    "name=Mug&default_price_data[currency]=usd&default_price_data[unit_amount]=1200&metadata[sku]=m1",
                ),
                &attempt(),
            )
            .unwrap()
            .json();
        let id = prod["id"].as_str().unwrap();
        let price = p
            .retrieve_price(prod["default_price"].as_str().unwrap())
            .unwrap()
            .json();
        assert_eq!(
            (price["product"].as_str(), price["unit_amount"].as_u64()),
            (Some(id), Some(1200))
        );
        let up = p
            .update_product(id, &form("name=Big mug&description=d&active=false"), &attempt())
            .unwrap()
            .json();
        assert_eq!(
            (up["name"].as_str(), up["active"].as_bool()),
            (Some("Big mug"), Some(false))
        );
        assert_eq!(up["metadata"], json!({"sku": "m1"}));
        let e = p.delete_product(id, &attempt()).unwrap_err();
        assert!(e.message.contains("user-created prices"), "{e}");

        let custom = p.create_product(&form("name=Pen&id=pen-1"), &attempt()).unwrap().json();
        assert_eq!(custom["id"], "pen-1");
        let e = p.create_product(&form("name=Pen&id=pen-1"), &attempt()).unwrap_err();
        assert_eq!(
            (e.param.as_deref(), e.code.as_deref()),
            (Some("id"), Some("resource_already_exists"))
        );
        let gone = p.delete_product("pen-1", &attempt()).unwrap().json();
        assert_eq!(gone, json!({"id": "pen-1", "object": "product", "deleted": true}));
        assert_eq!(p.retrieve_product("pen-1").unwrap_err().status.code(), 404);
        assert_eq!(
            p.update_product("pen-1", &form("name=x"), &attempt())
                .unwrap_err()
                .status
                .code(),
            404
        );
        let listed = p.list_products(&form("")).unwrap().json();
        assert_eq!(
            listed["data"].as_array().unwrap().len(),
            1,
            "the deleted one is skipped"
        );
        let e = p
            .create_product(&form("name=x&default_price_data[currency]=usd"), &attempt())
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("default_price_data[unit_amount]"));
        let other = p
            .create_price(&form("currency=usd&unit_amount=5&product_data[name]=o"), &attempt())
            .unwrap()
            .json();
        let e = p
            .update_product(
                id,
                &form(&format!("default_price={}", other["id"].as_str().unwrap())),
                &attempt(),
            )
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("default_price"));
        assert_eq!(
            p.search_products(&form("query=name:'Big mug'")).unwrap().json()["data"][0]["id"],
            Value::String(id.into())
        );
    }
}
