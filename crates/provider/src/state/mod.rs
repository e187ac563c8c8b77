//! The provider's state in memory: the store of every object (`payments`: intents,
//! charges, refunds, customers, payment methods, setup intents, webhook endpoints, and
//! the duplicate policy), the ledger of money movements (`ledger`), the sharded tables
//! they are kept in (`table`, `shard`) and how their indexes grow (`index`), shared text
//! one word wide (`thin`), the one clock everything reads (`clock`), and thread-local
//! modes set for one call (`scoped`).

pub mod clock;
pub mod index;
pub mod ledger;
pub mod payments;
pub mod rare;
pub mod scoped;
pub mod shard;
pub mod table;
pub mod thin;
pub mod trace;
