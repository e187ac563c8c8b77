//! Payment methods (`/v1/payment_methods`): the saved card object and its JSON
//! (`object`), what each operation does (`rules`: create, retrieve, update, attach,
//! detach, list, and how a payment intent resolves its `payment_method`), and the
//! endpoints (`routes`).

pub mod object;
pub mod routes;
pub mod rules;
