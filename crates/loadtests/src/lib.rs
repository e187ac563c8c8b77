//! fauxpay's load generator: goose checkout flows with real retry behaviour, reconciled
//! against the provider's ledger, gating CI on zero double charges.
//!
//! A logical payment is one checkout (a fresh order id prefixed by the run id, an amount,
//! an idempotency key). Goose users run checkouts through the retrying [`client`], each
//! with a client [`mix`] behaviour; every attempt goes to the [`journal`]. After the run
//! the [`ledger`] slice of this run is streamed from the provider's HTTP API and
//! [`reconcile`]d with what the clients saw; when the template has a fulfilment probe,
//! the provider's webhook deliveries are drained and the target is asked how often it
//! fulfilled each order ([`fulfillment`]); the [`report`] gates the exit code, and
//! [`report_html`] draws the run's [`timeline`] for people. The
//! provider is known only through its HTTP API, never through its code.

#![deny(unsafe_code)]

pub mod alarm;
pub mod args;
pub mod arrival;
pub mod body;
pub mod client;
pub mod error;
pub mod feeder;
pub mod flow;
pub mod fulfillment;
pub mod interrupt;
pub mod journal;
pub mod latency;
pub mod ledger;
pub mod merge;
pub mod mix;
pub mod open;
pub mod output;
pub mod plan;
pub mod pointer;
pub mod progress;
pub mod reconcile;
pub mod report;
pub mod report_html;
pub mod run;
pub mod saved;
pub mod scenario;
pub mod scenarios;
pub mod slo;
pub mod steps;
pub mod template;
pub mod timeline;

pub use args::{LoadArgs, MergeArgs};
pub use error::{ConfigError, LoadError};
pub use merge::merge;
pub use report::Report;
pub use run::{exit_code, run};
pub use saved::{reconcile_saved, ReconcileArgs};
