//! Customers (`/v1/customers`): the object and its JSON (`object`), what each operation
//! does (`rules`: create, retrieve, update, delete, list, search, the default payment
//! method), and the endpoints (`routes`).

pub mod object;
pub mod routes;
pub mod rules;
