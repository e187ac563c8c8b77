//! Prices (`/v1/prices`): how much a product costs, one-time or recurring. The object
//! and its JSON (`object`), what each operation does (`rules`: create, with
//! `product_data`; retrieve, update, list, search, lookup keys), and the endpoints
//! (`routes`).

pub mod object;
pub mod routes;
pub mod rules;
