//! Charges (`/v1/charges`): the object and its JSON (`object`), what creating and
//! capturing one does (`rules`), and the endpoints (`routes`).

pub mod object;
pub mod routes;
pub mod rules;
