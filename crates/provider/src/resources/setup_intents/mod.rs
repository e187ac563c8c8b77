//! Setup intents (`/v1/setup_intents`): saving a card for later payments. The object and
//! its JSON (`object`), the state machine and what each operation does, including
//! saving the card to the customer and marking it set up for off-session use (`rules`),
//! and the endpoints (`routes`).

pub mod object;
pub mod routes;
pub mod rules;
