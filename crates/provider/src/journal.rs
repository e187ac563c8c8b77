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
use crate::state::shard::{thread_turn, Sharded, SHARDS};
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

/// Requests a thread logs one after another into one shard before it moves on to the
/// next. A shard picked by sequence number, as it was, had each request lock a shard and
/// write a tail its thread last touched 64 requests before, and had two threads write
/// every shard; in runs, a shard's lock and tail stay in the thread's cache for a run, and
/// two threads share a shard only where their runs meet.
const RUN: u32 = 16;

/// One thread's runs cover every shard, a whole number of times, in the log's capacity:
/// what keeps one thread's most recent requests exactly.
const _: () = assert!(REQUEST_LOG_CAPACITY % (SHARDS * RUN as usize) == 0);

/// The shard the calling thread logs its next request into: runs of [`RUN`] in each shard
/// in turn, so that every shard takes an equal share of a thread's requests. A journal
/// that one thread alone logs into keeps exactly its most recent
/// [`REQUEST_LOG_CAPACITY`] requests; one that several threads log into at once keeps
/// them give or take a run a thread in each shard. Threads start their runs apart, by
/// their turns ([`thread_turn`]). One cursor a thread serves every journal of the
/// process (a thread logging into two journals in turn spreads each less evenly): where a
/// request goes only spreads the writes, and any shard will do.
fn next_shard() -> usize {
    use std::cell::Cell;
    thread_local!(static AT: Cell<Option<(usize, u32)>> = const { Cell::new(None) });
    AT.with(|at| {
        // 23 and 64 share no factor: the first 64 threads start in 64 shards.
        let (shard, logged) = at.get().unwrap_or_else(|| (thread_turn().wrapping_mul(23) % SHARDS, 0));
        let (shard, logged) = if logged == RUN {
            ((shard + 1) % SHARDS, 0)
        } else {
            (shard, logged)
        };
        at.set(Some((shard, logged + 1)));
        shard
    })
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
        let mut shard = self.shards.lock_index(next_shard());
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

    fn request(identity: String) -> RequestRecord {
        RequestRecord {
            seq: 0,
            request_id: RequestId::generate(),
            time_ms: 0,
            method: Verb::Post,
            path: "/".into(),
            identity: identity.into(),
            attempt: 1,
            idempotency_key: None,
            correlation_id: None,
            fault: None,
            outcome: Outcome::Status(200),
            committed_status: None,
            replayed: false,
            object: None,
        }
    }

    #[test]
    fn the_request_log_is_bounded_and_ordered() {
        let journal = Journal::default();
        for i in 0..(REQUEST_LOG_CAPACITY + 500) {
            journal.record(request(format!("id-{i}")));
        }
        let all = journal.recent(usize::MAX, |_| true);
        // One thread's requests: exactly the most recent ones, whichever shard its runs
        // began in.
        let seqs: Vec<u64> = all.iter().map(|r| r.seq).collect();
        let expected: Vec<u64> = (501..=(REQUEST_LOG_CAPACITY as u64 + 500)).collect();
        assert_eq!(seqs, expected);
        let last = journal.recent(3, |_| true);
        assert_eq!(last[2].identity.as_str(), format!("id-{}", REQUEST_LOG_CAPACITY + 499));
    }

    #[test]
    fn threads_logging_at_once_keep_the_log_bounded_ordered_and_recent() {
        let journal = Journal::default();
        let per_thread = REQUEST_LOG_CAPACITY;
        std::thread::scope(|s| {
            for t in 0..3 {
                let journal = &journal;
                s.spawn(move || {
                    for i in 0..per_thread {
                        journal.record(request(format!("t{t}-{i}")));
                    }
                });
            }
        });
        let all = journal.recent(usize::MAX, |_| true);
        assert!(all.len() <= REQUEST_LOG_CAPACITY, "{}", all.len());
        assert!(all.windows(2).all(|w| w[0].seq < w[1].seq));
        // The last request logged is kept (a thread that finished before the others may
        // rightly have lost its own last ones to their later requests). Of the most
        // recent requests, a shard lost at most a run a thread to other runs that came
        // after them in it.
        let total = (3 * per_thread) as u64;
        assert_eq!(all.last().map(|r| r.seq), Some(total));
        let recent = all
            .iter()
            .filter(|r| r.seq > total - REQUEST_LOG_CAPACITY as u64)
            .count();
        let slack = SHARDS * RUN as usize * 3;
        assert!(
            recent >= REQUEST_LOG_CAPACITY - slack,
            "{recent} of the {REQUEST_LOG_CAPACITY} most recent requests kept"
        );
    }
}
