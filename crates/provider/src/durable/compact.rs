//! Compaction of the data dir's log under `--retain`: the log is rewritten without the
//! writes whose effects have all left the live state, so that a restart replays the live
//! window, not the whole history, and the file stops growing without end.
//!
//! The log keeps requests, not state, so a write may be left out only when nothing that
//! stays depends on it. Each write's record is kept in memory with the keys its
//! operation touched ([`Meta`], from `crate::state::trace`). [`plan`] walks the records
//! from the newest back, starting from the keys live now (every stored object, every
//! correlation id the ledger holds, the keys the records after the compacted part
//! touched, the events with deliveries still owed): a write is kept when it wrote a
//! needed key (or a key of a store a kept write scanned), when its idempotency key is
//! still within its TTL, or when it changed a webhook endpoint; a kept write makes every
//! key it touched needed in turn. Attempt counts still within the TTL are kept (a left-out
//! write's count is written on its own), the profile swaps, resets and `--retain`
//! cutoffs are kept, and a `totals` record carries the ledger's counts of the writes left
//! out. Replaying the kept records therefore gives every kept write the state it read
//! when it ran, and so the same answer and the same live state; recovery counts a write
//! that answers otherwise (and the tests hold it to zero).
//!
//! `durable::compaction` runs it beside the provider. This module is plain data and the
//! rules, free of the provider and of files.

use std::collections::HashSet;

use crate::durable::Record;
use crate::state::ledger::LedgerTotals;
use crate::state::trace::{Touch, Touched};
use crate::stripe::ids::CorrelationId;

/// What compaction needs to know of one record of the log, kept beside it in memory.
#[derive(Debug, Clone)]
pub struct Meta {
    /// Where its frame starts in the file, and its length (header included).
    pub offset: u64,
    pub len: u32,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Commit {
        at_ms: u64,
        /// It has an idempotency key (kept while the key is within its TTL).
        keyed: bool,
        /// It changed a webhook endpoint (every later event depends on those: kept).
        always: bool,
        /// Without a key: the attempt the fault engine counted for its correlation id.
        counted: Option<(String, u32)>,
        /// The keys its operation touched.
        touched: Box<[Touch]>,
        /// The events it made that owed deliveries, with how many each.
        owed: Box<[(Touch, u32)]>,
        /// The ledger's last sequence number before it ran.
        ledger_seq: u64,
    },
    Attempt {
        at_ms: u64,
    },
    /// A delivery that ended: its event, and its endpoint's URL (hashed).
    Delivered {
        event: Box<str>,
        url: u64,
    },
    Retired,
    /// A `totals` or `sequence` record (an earlier compaction's).
    Totals,
    /// A profile swap or a reset: always kept.
    Other,
}

impl Meta {
    /// What is known of `record`, whose frame of `len` bytes was appended at `offset`,
    /// having touched `touched`.
    pub fn of(record: &Record, offset: u64, len: u64, touched: Touched, ledger_seq: u64) -> Self {
        let kind = match record {
            Record::Commit(c) => Kind::Commit {
                at_ms: c.at_ms,
                keyed: c.idempotency_key.is_some(),
                always: c.endpoint.starts_with("/v1/webhook_endpoints"),
                // The identity the fault engine counted it under (its correlation id's).
                counted: match (&c.idempotency_key, &c.correlation_id, c.attempt) {
                    (None, Some(correlation), Some(n)) => {
                        crate::fault_injection::counted_identity(None, Some(&CorrelationId::new(correlation)))
                            .map(|identity| (identity.to_string(), n))
                    }
                    _ => None,
                },
                touched: touched.keys.into_boxed_slice(),
                owed: touched.owed.into_boxed_slice(),
                ledger_seq,
            },
            Record::Attempt { at_ms, .. } => Kind::Attempt { at_ms: *at_ms },
            Record::Delivered { event, url, .. } => Kind::Delivered {
                event: event.as_str().into(),
                url: url_hash(url),
            },
            Record::Retired { .. } => Kind::Retired,
            Record::Totals(_) | Record::Sequence { .. } => Kind::Totals,
            Record::Profile { .. } | Record::Reset => Kind::Other,
        };
        // A frame is at most file::MAX_FRAME long.
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        Self { offset, len, kind }
    }
}

fn url_hash(url: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    url.hash(&mut h);
    h.finish()
}

/// What the plan does with the records of the compacted part, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Copies record `i` as it is.
    Copy(usize),
    /// Writes a record made here (a left-out write's attempt count, the totals).
    Write(Record),
}

/// What [`plan`] needs beside the records.
pub struct Context<'a> {
    /// Keys live now (see the module docs).
    pub live: HashSet<Touch>,
    /// Wall-clock now, and the idempotency keys' (and attempt counts') TTL, in ms.
    pub now_ms: u64,
    pub ttl_ms: u64,
    /// The deliveries that ended in the records after the compacted part.
    pub later_deliveries: &'a [(Touch, u64)],
    /// The touch of an event id (its key in the events table).
    pub event_touch: &'a dyn Fn(&str) -> Option<Touch>,
    /// The ledger's totals where the compacted part ends.
    pub totals: LedgerTotals,
}

/// Which records of `metas` (the compacted part, oldest first) the new log keeps, and
/// what it writes in place of the others (see the module docs).
pub fn plan(metas: &[Meta], cx: Context<'_>) -> Vec<Step> {
    let Context {
        mut live,
        now_ms,
        ttl_ms,
        later_deliveries,
        event_touch,
        totals,
    } = cx;
    // A key (or an attempt count) is live while its age is under the TTL in force now:
    // recovery restores one only then too. A later restart with a longer --key-ttl does
    // not bring back what was left out (docs/serve.md says so).
    let young = |at_ms: u64| now_ms.saturating_sub(at_ms) < ttl_ms;
    // Events whose deliveries have not all ended are still owed: live (the running
    // provider keeps delivering them, retired or not, and so does a restart).
    let mut ended: HashSet<(Touch, u64)> = later_deliveries.iter().copied().collect();
    for m in metas {
        if let Kind::Delivered { event, url } = &m.kind {
            if let Some(t) = event_touch(event) {
                ended.insert((t, *url));
            }
        }
    }
    let mut ends: std::collections::HashMap<Touch, u32> = std::collections::HashMap::new();
    for (t, _) in &ended {
        *ends.entry(*t).or_default() += 1;
    }
    for m in metas {
        if let Kind::Commit { owed, .. } = &m.kind {
            for (event, wanted) in owed.iter() {
                if ends.get(event).copied().unwrap_or(0) < *wanted {
                    live.insert(*event);
                }
            }
        }
    }
    let mut keep = vec![false; metas.len()];
    for (i, m) in metas.iter().enumerate().rev() {
        if let Kind::Commit {
            at_ms,
            keyed,
            always,
            touched,
            ..
        } = &m.kind
        {
            let needed = *always
                || (*keyed && young(*at_ms))
                || touched
                    .iter()
                    .any(|t| t.is_write() && (live.contains(&t.plain()) || live.contains(&t.store())));
            if needed {
                keep[i] = true;
                live.extend(touched.iter().map(|t| t.plain()));
            }
        }
    }
    let first_kept = keep.iter().position(|k| *k).unwrap_or(metas.len());
    let mut steps = Vec::new();
    // Whether a write was left out since the last one kept: the ledger's sequence
    // numbers it took are then skipped before the next one kept, as they were.
    let mut gap = false;
    for (i, m) in metas.iter().enumerate() {
        match &m.kind {
            Kind::Commit { ledger_seq, .. } if keep[i] => {
                if std::mem::take(&mut gap) {
                    steps.push(Step::Write(Record::Sequence { ledger: *ledger_seq }));
                }
                steps.push(Step::Copy(i));
            }
            Kind::Commit { at_ms, counted, .. } => {
                gap = true;
                if let Some((identity, n)) = counted.as_ref().filter(|_| young(*at_ms)) {
                    steps.push(Step::Write(Record::Attempt {
                        identity: identity.clone(),
                        n: *n,
                        at_ms: *at_ms,
                    }));
                }
            }
            Kind::Attempt { at_ms } if young(*at_ms) => steps.push(Step::Copy(i)),
            Kind::Attempt { .. } => {}
            Kind::Delivered { event, .. } => {
                if event_touch(event).is_some_and(|t| live.contains(&t)) {
                    steps.push(Step::Copy(i));
                }
            }
            Kind::Retired if i > first_kept => steps.push(Step::Copy(i)),
            Kind::Retired => {}
            // An earlier compaction's totals or sequence: superseded by the ones written
            // here, but the numbers it skipped stay skipped.
            Kind::Totals => gap = true,
            Kind::Other => steps.push(Step::Copy(i)),
        }
    }
    steps.push(Step::Write(Record::Totals(totals)));
    steps
}
/// Whether the log has grown enough since its last compaction to compact it again: by
/// `min_bytes`, or by a third of its compacted size when that is more.
pub fn due(log_end: u64, compacted_end: u64, min_bytes: u64) -> bool {
    log_end.saturating_sub(compacted_end) >= min_bytes.max(compacted_end / 3)
}

/// The provider's compaction state.
#[derive(Debug, Default)]
pub struct State {
    /// The data dir (set when the log is opened with compaction on).
    pub dir: std::sync::OnceLock<std::path::PathBuf>,
    pub running: std::sync::atomic::AtomicBool,
    /// The log's length after its last compaction (or at start).
    pub compacted_end: std::sync::atomic::AtomicU64,
    /// Compactions done since the start.
    pub runs: std::sync::atomic::AtomicU64,
}
#[cfg(test)]
mod tests {
    use super::*;

    fn commit(at_ms: u64, keyed: bool, touched: &[Touch]) -> Meta {
        Meta {
            offset: 0,
            len: 10,
            kind: Kind::Commit {
                at_ms,
                keyed,
                always: false,
                counted: None,
                touched: touched.into(),
                owed: Box::new([]),
                ledger_seq: 0,
            },
        }
    }

    fn w(tag: u16, key: u64) -> Touch {
        let ((), t) = crate::state::trace::touched(|| crate::state::trace::write(tag, key << 16));
        t.keys[0]
    }

    fn r(tag: u16, key: u64) -> Touch {
        Touch::key(tag, key << 16)
    }

    fn cx(live: &[Touch]) -> Context<'static> {
        Context {
            live: live.iter().copied().collect(),
            now_ms: 100_000,
            ttl_ms: 1_000,
            later_deliveries: &[],
            event_touch: &|_| None,
            totals: LedgerTotals::default(),
        }
    }

    fn copied(steps: &[Step]) -> Vec<usize> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Copy(i) => Some(*i),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_write_is_kept_when_a_live_key_or_a_kept_write_depends_on_it() {
        let metas = [
            commit(1, false, &[w(1, 1)]),          // 0: made object 1 (retired since)
            commit(2, false, &[w(1, 2)]),          // 1: made object 2 (retired, nothing needs it)
            commit(3, false, &[r(1, 1), w(2, 3)]), // 2: read object 1, made object 3 (live)
            commit(4, false, &[w(1, 4)]),          // 3: made object 4 (live)
            commit(5, false, &[w(1, 4), w(3, 5)]), // 4: updated 4, made 5 (retired)
            commit(99_500, true, &[w(1, 6)]),      // 5: retired, but its key is young
            commit(6, true, &[w(1, 7)]),           // 6: retired, key expired
        ];
        let steps = plan(&metas, cx(&[r(2, 3), r(1, 4)]));
        assert_eq!(copied(&steps), vec![0, 2, 3, 4, 5]);
        assert!(matches!(steps.last(), Some(Step::Write(Record::Totals(_)))));
    }

    #[test]
    fn a_scan_keeps_every_write_of_the_scanned_store() {
        let metas = [
            commit(1, false, &[w(4, 1)]),
            commit(2, false, &[w(5, 2)]),
            commit(3, false, &[Touch::all(4), w(6, 3)]),
        ];
        assert_eq!(copied(&plan(&metas, cx(&[r(6, 3)]))), vec![0, 2]);
    }

    #[test]
    fn a_left_out_writes_young_attempt_count_is_written_alone() {
        let mut young = commit(99_800, false, &[w(1, 1)]);
        if let Kind::Commit { counted, .. } = &mut young.kind {
            *counted = Some(("correlation:o1".into(), 2));
        }
        let steps = plan(&[young], cx(&[]));
        assert_eq!(
            steps[0],
            Step::Write(Record::Attempt {
                identity: "correlation:o1".into(),
                n: 2,
                at_ms: 99_800
            })
        );
    }

    #[test]
    fn events_with_deliveries_owed_keep_their_write() {
        let (first, second) = (w(9, 1), w(9, 2));
        let mut metas = [commit(1, false, &[first]), commit(2, false, &[second])];
        // Each event was owed to two endpoints.
        for (m, e) in metas.iter_mut().zip([first, second]) {
            if let Kind::Commit { owed, .. } = &mut m.kind {
                *owed = Box::new([(e.plain(), 2)]);
            }
        }
        // The first event's deliveries both ended; the second's only one of two (an
        // endpoint deleted since still gets its queued delivery).
        let delivered = [
            (first.plain(), 7u64),
            (first.plain(), 8),
            (second.plain(), 7),
            (second.plain(), 7),
        ];
        let mut cx = cx(&[]);
        cx.later_deliveries = &delivered;
        assert_eq!(copied(&plan(&metas, cx)), vec![1]);
    }
}
