//! fauxpay: a stateful, Stripe-compatible fake payment provider that honours
//! idempotency keys exactly, and keeps a ledger that finds every double charge.
//!
//! The crate's library is what the `fauxpay` binary runs; embedders and tests start a
//! provider in-process with [`provider::RunningProvider::start`].

#![deny(unsafe_code)]

pub mod demo;
pub mod error_chain;
pub mod faults;
pub mod merchant;
pub mod provider;
