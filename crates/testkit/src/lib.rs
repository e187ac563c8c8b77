//! What fauxpay's integration tests share, one module per thing under test, so that each
//! crate's single test binary (`tests/it/main.rs`) starts the same way:
//! - [`provider`]: a provider on a free port and a client for it ([`provider::Harness`]),
//!   the skip policy for tools a machine may lack ([`provider::missing_tool`]);
//! - [`merchant`]: a provider and a reference merchant on free ports, a retrying checkout
//!   client, the ledger grouped by order, the local Redis and PostgreSQL (and a Redis
//!   server of a test's own), the shared scenarios ([`merchant::scenarios`]);
//! - [`dashboard`]: a provider seeded with something to show on every dashboard page;
//! - [`fakes`]: misbehaving servers (an endless answer).
//!
//! Every wait here has a deadline: a test that waits for something that never comes
//! fails, naming it, instead of hanging.

pub mod dashboard;
pub mod fakes;
pub mod merchant;
pub mod provider;
