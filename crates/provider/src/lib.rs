//! The fake provider (`fauxpay serve`): a stateful, Stripe-compatible payment API.
//!
//! Layout (each folder's `mod.rs` says what it owns):
//! - `http/`: the edge, the only code that knows axum and hyper: connections, the observe
//!   layer, extraction, responses, the `/v1` route table, the admin API, the dashboard's
//!   pages, the provider's life cycle, the webhook client.
//! - `pipeline/`: one request's life, as a value the edge carries out (faults ×
//!   idempotency admission × the operation).
//! - `resources/`: one folder per Stripe resource (object, rules, endpoints), 3-D Secure,
//!   and the table of every endpoint.
//! - `idempotency/`, `journal`, `fault_injection/`, `durable/`, `webhooks/`: keys,
//!   the request log, the bridge to `fauxpay-faults`, the data dir, webhook delivery.
//! - `state/`: the store, the ledger, the tables, the clock; `stripe/`: Stripe's wire
//!   conventions (params, JSON, ids, paging, search, `expand[]`, spec validation).
//! - `app`, `config`, `error`, `reply`, `metrics`, `dashboard/`: shared state, settings,
//!   Stripe's errors, replies, metrics, the dashboard's view models.
//!
//! Modules are private unless another crate needs them; embedders start a provider with
//! [`RunningProvider::start`] and a [`Config`].

// `ApiError` carries Stripe's whole error object; it is built on the slow path and
// returned through a few frames, so boxing it would buy nothing measurable.
#![allow(clippy::result_large_err)]
#![deny(unsafe_code)]

mod app;
pub mod config;
mod dashboard;
pub mod durable;
mod error;
mod fault_injection;
mod http;
mod idempotency;
mod journal;
mod metrics;
mod pipeline;
mod reply;
pub mod resources;
mod state;
pub mod stripe;
#[cfg(test)]
mod test_support;
pub mod webhooks;

pub use app::Provider;
pub use config::{Config, Limits};
pub use http::guard::LOOPBACK_HOSTS;
pub use http::lifecycle::{serve, RunningProvider};
pub use http::server::{raise_open_file_limit, serve_connections, ConnectionStats};
pub use idempotency::Mode as IdempotencyMode;
pub use pipeline::direct::post as post_in_process;
pub use state::payments::{CorrelationSource, DuplicatePolicy};
pub use stripe::ids::ApiKey;
