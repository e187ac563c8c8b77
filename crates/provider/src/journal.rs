//! The request journal: a bounded ring of the recent `/v1` requests, each with how it
//! ended (the status sent, or dropped, reset, held), its fault, its key and the object it
//! touched, served by `GET /__fauxpay/requests` and the dashboard so that any double
//! charge can be explained after the fact. Sharded: a request writes one shard.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Serialize, Serializer};

use crate::idempotency::key::IdempotencyKey;
use crate::resources::endpoint::Verb;
use crate::state::shard::{Sharded, SHARDS};
use crate::stripe::ids::{CorrelationId, ObjectId, RequestId};

/// Requests kept for `GET /__fauxpay/requests`.
pub const REQUEST_LOG_CAPACITY: usize = 16_384;

/// One line of `GET /__fauxpay/requests`.
#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    pub seq: u64,
    pub request_id: RequestId,
    pub time_ms: u64,
    #[serde(serialize_with = "ser_verb")]
    pub method: Verb,
    pub path: Box<str>,
    pub identity: crate::state::thin::ThinStr,
    pub attempt: u32,
    pub idempotency_key: Option<IdempotencyKey>,
    pub correlation_id: Option<CorrelationId>,
    pub fault: Option<Arc<str>>,
    /// The HTTP status sent, or what happened instead: `dropped`, `reset`, `hung`.
    pub outcome: Outcome,
    /// The status the endpoint produced, when a fault then kept it from the client.
    pub committed_status: Option<u16>,
    pub replayed: bool,
    /// The object the request created or touched (`pi_…`, `ch_…`, `re_…`), if any.
    pub object: Option<ObjectId>,
}

fn ser_verb<S: Serializer>(m: &Verb, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(m.as_str())
}

/// How a request ended, as the request log says it: the status sent (`"200"`), or what
/// happened to the connection instead (`"dropped"`, `"reset"`, `"hung"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not ended yet (never logged as such).
    Pending,
    Status(u16),
    /// Closed without a response byte.
    Dropped,
    /// Reset (RST).
    Reset,
    /// Held (`hang`) until the hold ended or the client left.
    Hung,
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Outcome::Pending => s.serialize_str(""),
            Outcome::Status(code) => s.collect_str(code),
            Outcome::Dropped => s.serialize_str("dropped"),
            Outcome::Reset => s.serialize_str("reset"),
            Outcome::Hung => s.serialize_str("hung"),
        }
    }
}

/// The journal itself: its shards, and how many requests were ever recorded.
#[derive(Default)]
pub struct Journal {
    shards: Sharded<VecDeque<RequestRecord>>,
    /// On a cache line of its own: every insert writes it, and its neighbours are read.
    seq: crossbeam_utils::CachePadded<AtomicU64>,
}

impl Journal {
    /// Adds a request to the log (the oldest entries fall out beyond the capacity).
    pub fn record(&self, mut record: RequestRecord) {
        record.seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let mut shard = self.shards.lock_index(record.seq as usize);
        if shard.len() >= REQUEST_LOG_CAPACITY / SHARDS {
            shard.pop_front();
        }
        shard.push_back(record);
    }

    /// How many requests have been logged since the start (the dashboard's change marker).
    pub fn logged(&self) -> u64 {
        self.seq.load(Ordering::Relaxed)
    }

    /// The most recent `limit` requests matching `keep`, oldest first.
    pub fn recent(&self, limit: usize, keep: impl Fn(&RequestRecord) -> bool) -> Vec<RequestRecord> {
        let mut out: Vec<RequestRecord> = Vec::new();
        for shard in self.shards.iter() {
            out.extend(shard.lock().iter().filter(|r| keep(r)).cloned());
        }
        out.sort_unstable_by_key(|r| r.seq);
        let skip = out.len().saturating_sub(limit);
        out.split_off(skip)
    }

    /// Forgets every request (`POST /__fauxpay/reset`); the count goes on.
    pub fn reset(&self) {
        for s in self.shards.iter() {
            s.lock().clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_log_is_bounded_and_ordered() {
        let journal = Journal::default();
        for i in 0..(REQUEST_LOG_CAPACITY + 500) {
            journal.record(RequestRecord {
                seq: 0,
                request_id: RequestId::generate(),
                time_ms: 0,
                method: Verb::Post,
                path: "/".into(),
                identity: format!("id-{i}").into(),
                attempt: 1,
                idempotency_key: None,
                correlation_id: None,
                fault: None,
                outcome: Outcome::Status(200),
                committed_status: None,
                replayed: false,
                object: None,
            });
        }
        let all = journal.recent(usize::MAX, |_| true);
        assert!(all.len() <= REQUEST_LOG_CAPACITY);
        assert!(all.windows(2).all(|w| w[0].seq < w[1].seq));
        let last = journal.recent(3, |_| true);
        assert_eq!(last[2].identity.as_str(), format!("id-{}", REQUEST_LOG_CAPACITY + 499));
    }
}
