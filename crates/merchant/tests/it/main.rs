//! The reference merchants' integration tests, in one binary: a provider and a merchant
//! on free ports (`fauxpay_testkit::merchant`), on memory and on Redis + PostgreSQL.

mod bounded;
mod durable;
mod fencing;
mod profiles;
mod redis_outage;
mod scenarios;
mod webhooks;
