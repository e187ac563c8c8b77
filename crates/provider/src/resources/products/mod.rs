//! Products (`/v1/products`): what a price sells. The object and its JSON (`object`),
//! what each operation does (`rules`: create, with `default_price_data`; retrieve,
//! update, delete, list, search), and the endpoints (`routes`).

pub mod object;
pub mod routes;
pub mod rules;
