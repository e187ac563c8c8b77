//! Events (`/v1/events`): the object and its JSON (`object`: an [`object::Event`] holds a
//! shared snapshot of the object it is about, written out only when read or delivered),
//! the store every rule publishes to at its commit point (`store`: the events table, their
//! time to live, and the hook webhook delivery listens on), list and retrieve (`rules`),
//! and the endpoints (`routes`).

pub mod object;
pub mod routes;
pub mod rules;
pub mod store;
