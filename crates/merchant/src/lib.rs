//! Reference merchants: small checkout APIs that pay through the provider, one per strategy.
//!
//! They are the systems under test that prove the kit works: `naive` and `lock-only`
//! double-charge under provider faults (the load generator must catch them), `idempotent`
//! never does (it must raise no false alarm). Each serves `POST /checkout`, `GET
//! /orders/{id}`, `GET /health` and `POST /webhooks/stripe` ([`http`]) over a
//! [`strategy::CheckoutService`]. A signed `payment_intent.succeeded` fulfils its order
//! (in the checkout-session [`checkout_flow`], a paid `checkout.session.completed` and the
//! customer's visit to the success page do): on every signal for `naive` and `lock-only`
//! (the classic webhook bug, since Stripe delivers at least once), exactly once for
//! `idempotent`. The domain — orders and their
//! fenced state machine, key records, locks, the provider gateway, the reconciler, the
//! webhook signature — is plain Rust. [`serve`] and [`RunningMerchant`] (`server`) run
//! one; the idempotent strategy stores its state in memory by default, or in PostgreSQL
//! with its lock in Redis when given their URLs.
//!
//! The modules form layers, and none uses a module of a layer above its own: plain
//! values (`order`, `idempotency_record`, `clock`, `checkout_flow`, `webhook`); the checkout contract
//! (`checkout`); the ports to storage, locks and the provider (`store`, `lock`, `gateway`)
//! and their adapters (`memory_store`, `postgres_store`, `redis_lock`, `stripe_gateway`);
//! the rules built on them (`fencing`, `reconciler`, `order_book`); the strategies
//! (`strategy`, `naive`, `lock_only`, `idempotent`), the webhook receiver in front of
//! them (`webhook_receiver`) and their settings (`config`, `error`); the HTTP surface
//! (`http`, and the example storefront's pages and API, `storefront`; both answer through `respond`); and `server`, which wires them together. This file only declares and
//! re-exports.

pub mod checkout;
pub mod checkout_flow;
pub mod clock;
pub mod config;
pub mod error;
pub mod fencing;
pub mod gateway;
pub mod http;
pub mod idempotency_record;
pub mod idempotent;
pub mod lock;
pub mod lock_only;
pub mod memory_store;
pub mod naive;
pub mod order;
pub mod order_book;
pub mod postgres_store;
pub mod reconciler;
pub mod redis_lock;
pub mod respond;
pub mod server;
pub mod store;
pub mod storefront;
pub mod strategy;
pub mod stripe_gateway;
pub mod webhook;
pub mod webhook_receiver;

pub use config::MerchantConfig;
pub use error::MerchantError;
pub use server::{serve, Merchant, RunningMerchant};
pub use strategy::Strategy;
