//! Refunds (`/v1/refunds`): the object and its JSON (`object`), what a refund does to
//! its charge and the ledger (`rules`), and the endpoints (`routes`).

pub mod object;
pub mod routes;
pub mod rules;
