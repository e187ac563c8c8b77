//! The data dir (`fauxpay serve --data-dir DIR`): what makes a provider's state survive a
//! crash. Off by default (state in memory only).
//!
//! The state is kept as a log of the changes that made it ([`Record`]): each write that
//! ran its operation (with the ids it drew and the time it ran at, so running it again
//! makes the same objects, events and ledger records), each attempt the fault engine
//! counted, each profile swap and reset, and each webhook delivery that ended. Recovery
//! ([`crate::durable::recovery`]) runs the log again from the start.
//!
//! The log is one append-only file ([`file`]): a header with the schema version, then
//! frames of `length, CRC-32, record` (a write's in binary since schema 4, any other
//! JSON). A torn tail (a crash in the middle of a
//! write) is cut back to the last whole frame and reported; a corrupt frame before the
//! end, another program's file or a newer schema is refused, never reset.
//!
//! With `--retain`, the log is compacted ([`compact`]): rewritten without the writes
//! whose effects have all left the window, so that a restart replays the live window.
//!
//! Writes are group-committed by one writer thread ([`DataLog`]): requests append their
//! records to a shared buffer and wait until the writer has written (and, with
//! `--fsync always`, synced) past them before their answer leaves, so concurrent
//! requests share one `write` and one `fdatasync`.

pub mod commit;
pub mod compact;
pub mod compaction;
pub mod file;
pub mod record;
pub mod recovery;
mod writer;

pub use file::{DataDirError, Recovered, SCHEMA_VERSION};
pub use record::Record;
pub use writer::{DataLog, Fsync, Lsn, WriteFailed};
