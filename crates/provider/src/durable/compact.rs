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
//! [`run`] does it beside the running provider: the records up to now are taken (under
//! the commit lock, with the ledger's totals), the kept ones are copied into a new file
//! with the tail written since, and the writer puts it in the log's place between two
//! writes (`DataLog::swap`). A crash at any point leaves either the old log or the new
//! one whole.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::sync::Arc;
use std::time::Instant;

use crate::app::Provider;
use crate::durable::file::{self, encode_frame};
use crate::durable::writer::Swap;
use crate::durable::Record;
use crate::state::ledger::LedgerTotals;
use crate::state::trace::{Touch, Touched};

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
                counted: match (&c.idempotency_key, &c.correlation_id, c.attempt) {
                    (None, Some(correlation), Some(n)) => Some((format!("correlation:{correlation}"), n)),
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

/// What one compaction did, for its log line and the tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct Compacted {
    pub records_before: usize,
    pub records_after: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// Why a compaction did not happen.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error("compaction is off (it needs --retain and a data dir)")]
    Off,
    #[error("the log could not be written up to the compacted part (failing or closing)")]
    NotWritten,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the writer did not take the compacted log: {0}")]
    Swap(String),
    #[error("a --retain sweep ran while the log was being compacted; it is compacted at a later sweep")]
    Raced,
}

/// Compacts the log of `app` now (see the module docs); blocks until it is done.
pub fn run(app: &Provider, dir: &std::path::Path) -> Result<Compacted, CompactError> {
    let log = app.durable().ok_or(CompactError::Off)?;
    let started = Instant::now();
    let (end, metas, totals) = {
        let _order = log.commit_lock();
        let totals = app.payments.ledger.totals();
        let (end, metas) = log.take_metas().ok_or(CompactError::Off)?;
        (end, metas, totals)
    };
    match rewrite(app, dir, end, &metas, totals) {
        Ok((swap, done, mut compacted)) => {
            log.swap(swap);
            match done.recv() {
                Ok(Ok(len)) => {
                    compacted.bytes_after = len;
                    tracing::info!(
                        records_before = compacted.records_before,
                        records_after = compacted.records_after,
                        mb_before = compacted.bytes_before >> 20,
                        mb_after = compacted.bytes_after >> 20,
                        took = ?started.elapsed(),
                        "the data dir's log was compacted"
                    );
                    Ok(compacted)
                }
                Ok(Err((_, why))) => {
                    log.untake_metas(metas);
                    Err(CompactError::Swap(why))
                }
                Err(_) => {
                    log.untake_metas(metas);
                    Err(CompactError::Swap("the writer stopped".into()))
                }
            }
        }
        Err(e) => {
            // A partial rewrite (a full disk) is not left behind to fill it further.
            let _ = std::fs::remove_file(dir.join(file::COMPACTING_FILE));
            log.untake_metas(metas);
            Err(e)
        }
    }
}

type Done = std::sync::mpsc::Receiver<Result<u64, (Vec<Meta>, String)>>;

/// Writes the compacted log beside the old one (the kept records up to `end`, then the
/// tail written since), ready for the writer to put in its place.
fn rewrite(
    app: &Provider,
    dir: &std::path::Path,
    end: u64,
    metas: &[Meta],
    totals: LedgerTotals,
) -> Result<(Swap, Done, Compacted), CompactError> {
    let log = app.durable().ok_or(CompactError::Off)?;
    if !log.wait_written(end) {
        return Err(CompactError::NotWritten);
    }
    let payments = &app.payments;
    let mut live = HashSet::new();
    payments.intents.live_keys(&mut live);
    payments.charges.live_keys(&mut live);
    payments.refunds.live_keys(&mut live);
    payments.customers.live_keys(&mut live);
    payments.payment_methods.live_keys(&mut live);
    payments.setup_intents.live_keys(&mut live);
    payments.webhook_endpoints.live_keys(&mut live);
    payments.products.live_keys(&mut live);
    payments.prices.live_keys(&mut live);
    payments.checkout_sessions.live_keys(&mut live);
    payments.events.table.live_keys(&mut live);
    payments.ledger.live_keys(&mut live);
    let event_touch = |id: &str| crate::stripe::ids::EventId::parse(id).map(|id| payments.events.table.touch_of(&id));
    // What the records written since touched stays needed, and their ended deliveries count.
    let (later_deliveries, raced) = log.with_metas(|later| {
        let mut ended = Vec::new();
        let mut raced = false;
        for m in later {
            match &m.kind {
                Kind::Commit { touched, .. } => live.extend(touched.iter().map(|t| t.plain())),
                Kind::Delivered { event, url } => ended.extend(event_touch(event).map(|t| (t, *url))),
                // A sweep ran since the cut: what it retired was live at the cut, and
                // the totals were taken before it. Compact at a later sweep instead.
                Kind::Retired => raced = true,
                _ => {}
            }
        }
        (ended, raced)
    });
    if raced {
        return Err(CompactError::Raced);
    }
    let steps = plan(
        metas,
        Context {
            live,
            now_ms: crate::state::clock::now_ms(),
            ttl_ms: app.idempotency.ttl().as_millis() as u64,
            later_deliveries: &later_deliveries,
            event_touch: &event_touch,
            totals,
        },
    );

    let path = dir.join(file::LOG_FILE);
    let temp = dir.join(file::COMPACTING_FILE);
    let old = File::open(&path)?;
    // Read and write: once it is the log, the writer reads its tail back (the next
    // compaction's copy).
    let mut new = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, &mut new);
    out.write_all(&file::header())?;
    let mut at = file::HEADER_LEN;
    let mut reader = BufReader::with_capacity(1 << 20, &old);
    reader.seek(SeekFrom::Start(file::HEADER_LEN))?;
    let mut read_at = file::HEADER_LEN;
    let mut kept = Vec::with_capacity(steps.len());
    let mut frame = Vec::new();
    for step in &steps {
        match step {
            Step::Copy(i) => {
                let m = &metas[*i];
                if m.offset > read_at {
                    reader.seek_relative((m.offset - read_at) as i64)?;
                }
                frame.resize(m.len as usize, 0);
                reader.read_exact(&mut frame)?;
                read_at = m.offset + u64::from(m.len);
                out.write_all(&frame)?;
                kept.push(Meta {
                    offset: at,
                    ..m.clone()
                });
                at += u64::from(m.len);
            }
            Step::Write(record) => {
                frame.clear();
                encode_frame(&record.to_bytes(), &mut frame);
                out.write_all(&frame)?;
                kept.push(Meta::of(record, at, frame.len() as u64, Touched::default(), 0));
                at += frame.len() as u64;
            }
        }
    }
    out.flush()?;
    drop(out);
    // The tail written since, most of it here (the writer copies the rest).
    let copied_to = log.written();
    copy_range(&old, &mut new, end, copied_to)?;
    new.sync_all()?;
    let compacted = Compacted {
        records_before: metas.len(),
        records_after: kept.len(),
        bytes_before: end,
        bytes_after: 0,
    };
    let (done_tx, done) = std::sync::mpsc::channel();
    Ok((
        Swap {
            file: new,
            temp,
            path,
            old_prefix_end: end,
            new_prefix_end: at,
            copied_to,
            metas: kept,
            done: done_tx,
        },
        done,
        compacted,
    ))
}

fn copy_range(from: &File, to: &mut File, start: u64, end: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 1 << 20];
    let mut at = start;
    while at < end {
        let n = buf.len().min((end - at) as usize);
        from.read_exact_at(&mut buf[..n], at)?;
        to.write_all(&buf[..n])?;
        at += n as u64;
    }
    Ok(())
}

/// Whether the log has grown enough since its last compaction to compact it again: by
/// `min_bytes`, or by half its compacted size when that is more.
pub fn due(log_end: u64, compacted_end: u64, min_bytes: u64) -> bool {
    log_end.saturating_sub(compacted_end) >= min_bytes.max(compacted_end / 2)
}

/// Starts a compaction in the background when the log of `app` is due one and none is
/// running (called by the `--retain` sweep).
pub fn maybe_start(app: &Arc<Provider>) {
    use std::sync::atomic::Ordering;
    let (Some(log), Some(dir)) = (app.durable(), app.compaction.dir.get().cloned()) else {
        return;
    };
    if !log.compacts() || log.degraded().is_some() {
        return;
    }
    let state = &app.compaction;
    if !due(
        log.end(),
        state.compacted_end.load(Ordering::Relaxed),
        app.config.compact_after,
    ) {
        return;
    }
    // The rewrite needs room: at most the log's size again. Without it, compacting would
    // fill the disk the log itself needs (its writes would answer 503 until the rewrite
    // gave up); the log keeps growing instead, and the next sweep looks again.
    let room = rustix::fs::statvfs(&dir).map_or(u64::MAX, |v| v.f_bavail.saturating_mul(v.f_frsize));
    if room < log.end().saturating_add(64 << 20) {
        tracing::debug!(
            room,
            log = log.end(),
            "not compacting: too little disk space for the rewrite"
        );
        return;
    }
    if state.running.swap(true, Ordering::AcqRel) {
        return;
    }
    let owned = app.clone();
    let spawned = std::thread::Builder::new()
        .name("fauxpay-compact".into())
        .spawn(move || {
            let app = owned;
            let state = &app.compaction;
            match run(&app, &dir) {
                Ok(done) => {
                    state.compacted_end.store(done.bytes_after, Ordering::Relaxed);
                    state.runs.fetch_add(1, Ordering::Relaxed);
                    app.metrics.data_log_compactions.inc();
                }
                Err(CompactError::Raced) => tracing::debug!("compaction raced a sweep; tried again at the next one"),
                Err(e) => tracing::warn!(error = %e, "the data dir's log could not be compacted; it is kept whole and tried again later"),
            }
            state.running.store(false, Ordering::Release);
        });
    if spawned.is_err() {
        app.compaction.running.store(false, Ordering::Release);
    }
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
