//! The provider's integration tests, one module per concern, in one binary: each starts
//! a provider on a free port (`fauxpay_testkit::provider::Harness`) and talks to it
//! through real sockets, with real clients (reqwest, the async-stripe SDK, Stripe's
//! official Python and Node SDKs, Chromium where a page is under test).

mod bad_input;
mod checkout;
mod cross_site;
mod customers;
mod dashboard;
mod expand;
mod faults;
mod hostile;
mod idempotency;
mod official_sdks;
mod payment_intent_updates;
mod properties;
mod provider_api;
mod setup_intents;
mod spec_objects;
mod stripe_js;
mod stripe_sdk;
mod three_ds;
mod validation;
mod webhooks;
mod webhooks_tls;
