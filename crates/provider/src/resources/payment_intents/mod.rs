//! Payment intents (`/v1/payment_intents`): the object and its JSON (`object`), the
//! state machine and what each operation does (`rules`), and the endpoints (`routes`).

pub mod object;
pub mod routes;
pub mod rules;
