//! Speaking Stripe: what a request and an answer look like on the wire, independent of
//! any one resource. Form bodies in bracket notation (`params`), JSON writing (`json`),
//! ids and their formats (`ids`), lists and cursors (`paging`), the search language
//! (`search`), `expand[]` (`expand`), request validation against Stripe's OpenAPI spec
//! (`spec`), amounts and currencies (`money`), test cards (`cards`) and shared field
//! rules such as text limits (`fields`).

pub mod cards;
pub mod expand;
pub mod fields;
pub mod ids;
pub mod json;
pub mod money;
pub mod paging;
pub mod params;
pub mod search;
pub mod spec;
