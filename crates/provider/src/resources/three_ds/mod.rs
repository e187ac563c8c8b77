//! 3-D Secure, as Stripe's test mode plays it: which confirmations the card's issuer
//! wants to authenticate (`action`: the decision, the `next_action` handed to the
//! client, the authenticate request), the page at fauxpay that stands in for the
//! issuer's (`page`: plain HTML, no scripts), what the page shows of an intent and where
//! it sends the customer afterwards (`rules`), and the `/__fauxpay/…/authenticate`
//! endpoints that complete or fail an authentication (`routes`). The transitions
//! themselves are the intents' own rules (`payment_intents/rules.rs`,
//! `setup_intents/rules.rs`).

pub mod action;
pub mod page;
pub mod routes;
pub mod rules;
