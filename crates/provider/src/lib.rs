//! The fake provider (`fauxpay serve`): a stateful, Stripe-compatible payment API.
//!
//! Two layers, by folder:
//! - `http/`, the edge: connections, the observe layer (request ids, metrics labels,
//!   panics), extraction, responses, the `/v1` route table, the admin API and the
//!   server's life cycle. Nothing else in the provider knows axum or hyper.
//! - the core, everything else: one folder per Stripe resource (`payment_intents`,
//!   `charges`, `refunds`, `customers`, `payment_methods`, `setup_intents`, `events`,
//!   `webhook_endpoints`: its object and JSON, its rules, its endpoints), 3-D Secure
//!   (`three_ds`), webhook delivery (`webhooks`: signed, retried, with delivery faults), the request
//!   pipeline (faults × idempotency × the operation, as a value the edge carries out),
//!   and the shared machinery: params, ids, tables, pagination, search, `expand[]`, the
//!   idempotency store, the ledger, fault injection, metrics, and the dashboard's view
//!   models (`dashboard`; its pages are in `http/dashboard/`).
//!
//! This file only declares modules and re-exports what embedders use.

// `ApiError` carries Stripe's whole error object; it is built on the slow path and
// returned through a few frames, so boxing it would buy nothing measurable.
#![allow(clippy::result_large_err)]

pub mod app;
pub mod config;
pub mod dashboard;
pub mod durable;
pub mod error;
pub mod fault_injection;
pub mod http;
pub mod idempotency;
pub mod journal;
pub mod metrics;
pub mod pipeline;
pub mod reply;
pub mod resources;
pub mod state;
pub mod stripe;
#[cfg(test)]
pub mod test_support;
pub mod webhooks;

pub use app::Provider;
pub use config::{Config, Limits};
pub use http::lifecycle::{serve, RunningProvider};
pub use http::server::raise_open_file_limit;
pub use idempotency::Mode as IdempotencyMode;
pub use state::payments::{CorrelationSource, DuplicatePolicy};
