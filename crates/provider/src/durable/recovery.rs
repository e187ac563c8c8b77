//! Opening a provider on its data dir (`fauxpay serve --data-dir DIR`): read the log
//! ([`durable::file`]), run every record again on a fresh provider (each write's
//! operation at its recorded time with its recorded ids, so the same objects, events,
//! ledger records and stored responses come back), resume the webhook deliveries that
//! had not ended, and log every change from then on.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::app::Provider;
use crate::config::Config;
use crate::durable::compact::{Kind, Meta};
use crate::durable::file::{self, DataDirError, Recovered};
use crate::durable::record::Commit;
use crate::durable::{DataLog, Fsync, Record};
use crate::fault_injection::attempt::{Attempt, KeyKind};
use crate::fault_injection::counted_identity;
use crate::idempotency::admission::stored_result;
use crate::idempotency::key::IdempotencyKey;
use crate::idempotency::{Fingerprint, StoredResponse};
use crate::pipeline::execute::{execute_validated, status_of};
use crate::resources as api;
use crate::resources::endpoint::{Call, Endpoint, Verb};
use crate::resources::events::object::Event;
use crate::resources::events::store::{handing_off, Deferred, HandedOff, Publisher};
use crate::resources::webhook_endpoints::object::WebhookEndpoint;
use crate::state::clock;
use crate::state::shard::Hasher;
use crate::state::trace::{self, Touched};
use crate::stripe::cards::Decline;
use crate::stripe::ids::{self, ApiKey, CorrelationId, RequestId};
use fauxpay_faults as faults;

/// What recovery found, for the start-up line.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub records: u64,
    /// Writes run again.
    pub commits: u64,
    /// Webhook deliveries resumed (they had not ended before the restart).
    pub resumed_deliveries: u64,
    /// Bytes of a torn last write, cut off.
    pub torn_bytes: u64,
    /// Records whose frame was damaged and repaired: (index, byte offset, what).
    pub repaired: Vec<(u64, u64, &'static str)>,
    /// Records that repeated an earlier write (a duplicated frame), skipped.
    pub repeats: u64,
    pub created: bool,
    pub took: Duration,
    /// Writes that answered another status when run again than when they were made
    /// (the log was written by a fauxpay whose rules differ, or it does not match the
    /// state it was replayed onto), and the first of them.
    pub diverged: u64,
    pub first_divergence: Option<String>,
}

impl Summary {
    /// One line for the start-up log.
    pub fn describe(&self, dir: &Path) -> String {
        if self.created {
            return format!("data dir {}: new, empty", dir.display());
        }
        let count = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut line = format!(
            "data dir {}: recovered {} ({}) in {:.1?}, {} resumed",
            dir.display(),
            count(self.records, "record", "records"),
            count(self.commits, "write", "writes"),
            self.took,
            count(self.resumed_deliveries, "webhook delivery", "webhook deliveries"),
        );
        if self.torn_bytes > 0 {
            line.push_str(&format!(
                "; the last write was torn ({} bytes after the last whole record were discarded)",
                self.torn_bytes
            ));
        }
        if let Some((index, offset, what)) = self.repaired.first() {
            line.push_str(&format!(
                "; repaired {} (first: record {index} at byte {offset}, {what}): nothing was lost",
                count(self.repaired.len() as u64, "damaged record", "damaged records"),
            ));
        }
        if self.repeats > 0 {
            line.push_str(&format!(
                "; skipped {} that repeated an earlier write",
                count(self.repeats, "record", "records"),
            ));
        }
        if self.diverged > 0 {
            line.push_str(&format!(
                "; {} ended otherwise than when made, so the state differs from what clients were told (first: {}); was the log written by another fauxpay version?",
                count(self.diverged, "write", "writes"),
                self.first_divergence.as_deref().unwrap_or("?"),
            ));
        }
        line
    }
}

/// The provider for `config`: in memory, or recovered from `dir` and logging to it.
pub fn open(
    config: Config,
    dir: Option<&Path>,
    fsync: Fsync,
) -> Result<(Arc<Provider>, Option<Summary>), DataDirError> {
    let threads = match std::thread::available_parallelism() {
        Ok(n) if n.get() >= 2 => Threads::Two,
        _ => Threads::One,
    };
    open_with(config, dir, fsync, threads)
}

/// How many threads replay a log: one reads it and runs every record; or one reads,
/// decodes, restores the keys and counters and stores the events while another runs the
/// writes again ([`two_threads`]: on a machine with more than one core, unless compaction
/// needs each record's keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Threads {
    One,
    Two,
}

fn open_with(
    config: Config,
    dir: Option<&Path>,
    fsync: Fsync,
    threads: Threads,
) -> Result<(Arc<Provider>, Option<Summary>), DataDirError> {
    let Some(dir) = dir else {
        return Ok((Provider::new(config), None));
    };
    let started = Instant::now();
    // With --retain the live state is a window, not the history: nothing is reserved
    // from the log's size (its history), and replay retires as the provider did.
    let retain = config.retain;
    let app = Provider::recovering(config);
    let mut admit = Admit::new(&app);
    let mut replay = Replay::new(&app);
    if retain.is_none() {
        let payments = payments_in_log(dir);
        app.reserve(payments);
        // Best effort, as `Provider::reserve`: one request id a write.
        let _ = admit.seen.try_reserve(payments);
    }
    // With --retain the log is compacted: what compaction needs of each record is kept,
    // and the keys each write touches are noted as it runs again (on one thread: the
    // ledger's sequence number before each record is part of what it keeps).
    let mut metas = retain.map(|_| Vec::new());
    replay.trace = metas.is_some();
    let (log_file, mut found) = if metas.is_none() && threads == Threads::Two {
        two_threads(dir, &mut admit, &mut replay)?
    } else {
        file::open(dir, |_, offset, payload| {
            let record = Record::from_bytes(payload).map_err(|e| format!("not a record: {e}"))?;
            let meta = metas.as_ref().map(|_| {
                let seq = app.payments.ledger.last_seq();
                Meta::of(&record, offset, 8 + payload.len() as u64, Touched::default(), seq)
            });
            let touched = match admit.admit(record)? {
                Admitted::Skipped => Touched::default(),
                Admitted::Write(mut write) => {
                    let (touched, restore) = replay.write(&mut write, None)?;
                    if let Some(restore) = restore {
                        admit.restore(restore);
                    }
                    touched
                }
                Admitted::Barrier(record) => {
                    admit.barrier(record)?;
                    Touched::default()
                }
            };
            if let (Some(metas), Some(mut meta)) = (metas.as_mut(), meta) {
                if let Kind::Commit { touched: t, owed, .. } = &mut meta.kind {
                    *t = touched.keys.into_boxed_slice();
                    *owed = touched.owed.into_boxed_slice();
                }
                metas.push(meta);
            }
            Ok(())
        })?
    };
    let (commits, diverged, first_divergence, repeats) = (
        replay.commits,
        replay.diverged,
        replay.first_divergence.take(),
        admit.repeats,
    );
    drop(replay);
    let log = DataLog::start(log_file, fsync, metas).map_err(|source| DataDirError::Io {
        dir: dir.to_path_buf(),
        source,
    })?;
    if log.compacts() {
        let _ = app.compaction.dir.set(dir.to_path_buf());
        app.compaction
            .compacted_end
            .store(log.end(), std::sync::atomic::Ordering::Relaxed);
    }
    log.hold_lock(found.dir_lock.take());
    app.attach_data_log(log);
    // Resumed once the log is attached: a resumed delivery that ends at once is recorded
    // as ended, so the next restart does not send it again.
    let resumed = admit.resume_deliveries();
    drop(admit);
    let Recovered {
        records,
        torn_bytes,
        created,
        repaired,
        ..
    } = found;
    Ok((
        app,
        Some(Summary {
            records,
            commits,
            resumed_deliveries: resumed,
            torn_bytes,
            repaired,
            repeats,
            created,
            took: started.elapsed(),
            diverged,
            first_divergence,
        }),
    ))
}

/// Writes handed from the reading thread to the replaying one in one message.
const BATCH: usize = 1024;

/// What the reading thread hands the replaying one, in the log's order.
enum Job {
    /// A write to run again: the record's index and byte offset, for an error's line.
    Write { index: u64, offset: u64, write: Write },
    /// Answer [`Done::drained`] once every write before this one has run.
    Drain,
}

/// What the replaying thread hands back for one batch of [`Job`]s.
#[derive(Default)]
struct Done {
    /// Idempotency keys to restore, in the log's order.
    restores: Vec<Restore>,
    /// The writes' events, to store in the log's order.
    events: Vec<HandedOff>,
    /// The records run, for the reading thread to free.
    spent: Vec<Write>,
    /// Whether the batch ended with [`Job::Drain`].
    drained: bool,
}

/// Replays `dir`'s log on two threads. This one runs the writes again, in the log's
/// order; a second reads the log, checks and decodes each record, skips repeats, restores
/// the fault plan's attempt counters and, from what each write answered, its idempotency
/// key, and stores each write's events ([`handing_off`]: no write reads the events
/// table, and they are stored in the log's order, so each gets the sequence number it
/// gets on one thread). A record that changes the whole state (a reset, a profile, a
/// retirement, the ledger's totals) waits until every write before it has run and its
/// key and events are stored, and is then run by the reading thread while this one
/// waits: so each store sees its changes in the log's order, as on one thread.
fn two_threads(
    dir: &Path,
    admit: &mut Admit<'_>,
    replay: &mut Replay<'_>,
) -> Result<(std::fs::File, Recovered), DataDirError> {
    let (jobs_tx, jobs_rx) = std::sync::mpsc::sync_channel::<Vec<Job>>(4);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Done>();
    std::thread::scope(|s| {
        let reader = std::thread::Builder::new()
            .name("fauxpay-recovery".into())
            .spawn_scoped(s, move || {
                let feed = std::cell::RefCell::new(Feed {
                    jobs: jobs_tx,
                    done: done_rx,
                    batch: Vec::with_capacity(BATCH),
                });
                let admit = std::cell::RefCell::new(admit);
                let opened = file::open_then(
                    dir,
                    |index, offset, payload| {
                        let record = Record::from_bytes(payload).map_err(|e| format!("not a record: {e}"))?;
                        let (mut feed, mut admit) = (feed.borrow_mut(), admit.borrow_mut());
                        match admit.admit(record)? {
                            Admitted::Skipped => Ok(()),
                            Admitted::Write(write) => feed.push(&admit, Job::Write { index, offset, write }),
                            Admitted::Barrier(record) => {
                                feed.drain(&admit)?;
                                admit.barrier(record)
                            }
                        }
                    },
                    // Every write has run before the log is touched: one that fails leaves
                    // it as it was, as on one thread.
                    || feed.borrow_mut().drain(&admit.borrow()),
                );
                // After a damaged record, the writes before it still run (one of them
                // failing is the error said).
                let drained = feed.borrow_mut().drain(&admit.borrow());
                (opened, drained)
            })
            .map_err(|source| DataDirError::Io {
                dir: dir.to_path_buf(),
                source,
            })?;
        let mut failed = None;
        'jobs: for jobs in jobs_rx.iter() {
            let mut done = Done {
                spent: Vec::with_capacity(jobs.len()),
                ..Done::default()
            };
            for job in jobs {
                match job {
                    Job::Write {
                        index,
                        offset,
                        mut write,
                    } => match replay.write(&mut write, Some(&mut done.events)) {
                        Ok((_, restore)) => {
                            done.restores.extend(restore);
                            done.spent.push(write);
                        }
                        Err(why) => {
                            failed = Some(DataDirError::Unreadable {
                                dir: dir.to_path_buf(),
                                index,
                                offset,
                                why,
                            });
                            break 'jobs;
                        }
                    },
                    Job::Drain => done.drained = true,
                }
            }
            if done_tx.send(done).is_err() {
                break;
            }
        }
        // The reading thread stops at its next hand-over if this one stopped first.
        drop((jobs_rx, done_tx));
        let (opened, drained) = reader.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        if let Some(failed) = failed {
            return Err(failed);
        }
        let opened = opened?;
        drained.map_err(|why| DataDirError::Unreadable {
            dir: dir.to_path_buf(),
            index: opened.1.records,
            offset: opened.1.valid_len,
            why,
        })?;
        Ok(opened)
    })
}

/// The reading thread's side of [`two_threads`]: writes go out in batches, and their
/// idempotency keys are restored as their answers come back.
struct Feed {
    jobs: std::sync::mpsc::SyncSender<Vec<Job>>,
    done: std::sync::mpsc::Receiver<Done>,
    batch: Vec<Job>,
}

/// Why the reading thread stops when the replaying one has (its error is the one said).
const REPLAY_STOPPED: &str = "the replaying thread stopped";

impl Feed {
    fn push(&mut self, admit: &Admit<'_>, job: Job) -> Result<(), String> {
        self.batch.push(job);
        if self.batch.len() >= BATCH {
            self.send()?;
            while let Ok(done) = self.done.try_recv() {
                Self::restore(admit, done)?;
            }
        }
        Ok(())
    }

    fn send(&mut self) -> Result<(), String> {
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        self.jobs.send(batch).map_err(|_| REPLAY_STOPPED.to_string())
    }

    /// Waits until every write handed over has run and its key is restored.
    fn drain(&mut self, admit: &Admit<'_>) -> Result<(), String> {
        self.batch.push(Job::Drain);
        self.send()?;
        loop {
            let done = self.done.recv().map_err(|_| REPLAY_STOPPED.to_string())?;
            if Self::restore(admit, done)? {
                return Ok(());
            }
        }
    }

    /// Stores the events and restores the keys `done` holds, and frees its records;
    /// whether its batch was drained.
    fn restore(admit: &Admit<'_>, done: Done) -> Result<bool, String> {
        let events = &admit.app.payments.events;
        for handed in done.events {
            if !events.store_handed(handed) {
                return Err("a write's events were made for another store".into());
            }
        }
        for restore in done.restores {
            admit.restore(restore);
        }
        Ok(done.drained)
    }
}

/// About the fewest bytes a confirmed payment's record takes in the log: the log's
/// length divided by it is the most payments it can hold, which recovery makes room for
/// before replaying. Binary commits (schema 5: the benchmark's 1,000,000 payments make
/// 368 MB, ~386 bytes each; 399 MB in schema 4, where each event id was a token of the
/// record) and JSON ones (schema 3 and before: 694 MB, ~700 bytes each).
const LOG_BYTES_PER_PAYMENT: u64 = 370;
const JSON_LOG_BYTES_PER_PAYMENT: u64 = 640;

/// How many payments `dir`'s log can hold at most (0 when there is none yet).
fn payments_in_log(dir: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let path = dir.join(file::LOG_FILE);
    // The bytes the file holds on disk, not its length: a sparse tail (a crash on some
    // file systems leaves one; 16 GiB of it used to reserve 504 MB) holds none.
    let bytes = std::fs::metadata(&path).map_or(0, |m| m.len().min(m.blocks() * 512));
    // A log begun by a fauxpay of schema 3 or before holds JSON writes (and binary ones
    // after them, once opened by this one): its first write says which it mostly is.
    let per_payment = match file::peek(&path, Record::commit_is_binary) {
        Some(false) => JSON_LOG_BYTES_PER_PAYMENT,
        _ => LOG_BYTES_PER_PAYMENT,
    };
    usize::try_from(bytes / per_payment).unwrap_or(usize::MAX)
}

/// The part of replaying a log that is not running its writes again: skipping a record
/// that repeats an earlier write, the fault plan's attempt counters, the idempotency keys
/// (from what each write answered), the deliveries that ended, and the records that
/// change the whole state (a reset, a profile, a retirement, the ledger's totals).
struct Admit<'a> {
    app: &'a Arc<Provider>,
    /// Now, on the wall clock and the provider's clock (keys' and attempts' ages are
    /// measured from it).
    now_ms: u64,
    now: Instant,
    /// Deliveries that ended: (event id, endpoint URL) → acknowledged (else out of retries).
    ended: HashMap<(String, String), bool>,
    /// Every write's request id so far: a record that repeats one (a duplicated frame)
    /// is skipped, not run twice (hashed with the tables' fast hasher: SipHash was ~3% of
    /// recovery).
    seen: std::collections::HashSet<RequestId, Hasher>,
    /// Records skipped as repeats of an earlier one.
    repeats: u64,
    /// With `--retain`: the request ids in `seen`, oldest first, with their times (ids
    /// older than a retired cutoff leave `seen`: a repeated frame follows its original).
    seen_order: Option<std::collections::VecDeque<(u64, RequestId)>>,
    /// Events a `retired` record removed while deliveries of theirs were still pending:
    /// the running provider kept delivering them, so recovery resumes them too.
    orphans: Vec<Deferred>,
}

/// What a record asks of the writes' side of replay.
enum Admitted {
    /// Nothing: a repeat, or a record already applied (an attempt, a delivery's end).
    Skipped,
    /// A write to run again.
    Write(Write),
    /// A record that changes the whole state ([`Admit::barrier`]), to apply once every
    /// write before it has run.
    Barrier(Record),
}

/// A write to run again, with the keys its admission read.
struct Write {
    commit: Box<Commit>,
    key: Option<IdempotencyKey>,
    correlation_id: Option<CorrelationId>,
}

/// An idempotency key to restore with the answer its write gave.
struct Restore {
    api_key: ApiKey,
    key: IdempotencyKey,
    fingerprint: Fingerprint,
    stored: StoredResponse,
    at_ms: u64,
}

impl<'a> Admit<'a> {
    fn new(app: &'a Arc<Provider>) -> Self {
        Self {
            app,
            now_ms: clock::now_ms(),
            now: app.clock.now(),
            ended: HashMap::new(),
            seen: std::collections::HashSet::default(),
            repeats: 0,
            seen_order: app.config.retain.map(|_| std::collections::VecDeque::new()),
            orphans: Vec::new(),
        }
    }

    fn age(&self, at_ms: u64) -> Duration {
        Duration::from_millis(self.now_ms.saturating_sub(at_ms))
    }

    /// Takes `record` in: what it asks of the writes' side.
    fn admit(&mut self, record: Record) -> Result<Admitted, String> {
        match record {
            Record::Commit(c) => {
                let request_id = c.request_id;
                if !self.seen.insert(request_id) {
                    self.repeats += 1;
                    return Ok(Admitted::Skipped);
                }
                if let Some(order) = &mut self.seen_order {
                    order.push_back((c.at_ms, request_id));
                }
                let key = c
                    .idempotency_key
                    .as_deref()
                    .map(IdempotencyKey::parse)
                    .transpose()
                    .map_err(|e| format!("idempotency key: {e}"))?;
                let correlation_id = c.correlation_id.as_deref().map(CorrelationId::new);
                if let (Some(n), Some(identity)) = (c.attempt, counted_identity(key.as_ref(), correlation_id.as_ref()))
                {
                    self.app
                        .faults
                        .restore_attempt(identity, n, self.now, self.age(c.at_ms));
                }
                Ok(Admitted::Write(Write {
                    commit: c,
                    key,
                    correlation_id,
                }))
            }
            Record::Attempt { identity, n, at_ms } => {
                self.app
                    .faults
                    .restore_attempt(identity.into(), n, self.now, self.age(at_ms));
                Ok(Admitted::Skipped)
            }
            Record::Delivered { event, url, ok } => {
                self.ended.insert((event, url), ok);
                Ok(Admitted::Skipped)
            }
            other => Ok(Admitted::Barrier(other)),
        }
    }

    /// Applies a record that changes the whole state; every write before it has run.
    fn barrier(&mut self, record: Record) -> Result<(), String> {
        match record {
            Record::Profile { source } => {
                let profile = faults::parse_profile_text("the data dir's profile", &source)
                    .map_err(|e| format!("its fault profile no longer parses: {}", e.lines().join("; ")))?;
                self.app.swap_profile(profile, source);
            }
            Record::Reset => {
                self.app.reset();
                self.orphans.clear();
            }
            Record::Retired { cutoff_ms } => self.retire(cutoff_ms),
            Record::Totals(totals) => self.app.payments.ledger.set_totals(&totals),
            Record::Sequence { ledger } => self.app.payments.ledger.set_last_seq(ledger),
            Record::Commit(_) | Record::Attempt { .. } | Record::Delivered { .. } => {
                return Err(
                    "a write, an attempt or a delivery's end taken for a record that changes the whole state".into(),
                )
            }
        }
        Ok(())
    }

    /// Restores a write's idempotency key with its answer.
    fn restore(&self, r: Restore) {
        self.app
            .idempotency
            .restore(&r.api_key, &r.key, r.fingerprint, r.stored, self.now, self.age(r.at_ms));
    }

    /// A `retired` record: retires what the running provider's `--retain` sweep retired
    /// at this point of the log (so that memory follows the live window while the
    /// history is replayed), keeping aside the retired events whose deliveries were still
    /// pending, and forgetting what only the retired objects needed.
    fn retire(&mut self, cutoff_ms: u64) {
        let payments = &self.app.payments;
        payments.retire_before(cutoff_ms);
        self.app.faults.purge_attempts(self.now, self.app.idempotency.ttl());
        let ended = &self.ended;
        let pending_of = |event: &Event, endpoints: Vec<Arc<WebhookEndpoint>>| -> Vec<Arc<WebhookEndpoint>> {
            endpoints
                .into_iter()
                .filter(|e| !ended.contains_key(&(event.id().to_string(), e.url.to_string())))
                .collect()
        };
        let mut orphans: Vec<Deferred> = std::mem::take(&mut self.orphans)
            .into_iter()
            .chain(payments.events.take_gone_deferred())
            .filter_map(|(event, endpoints)| {
                let pending = pending_of(&event, endpoints);
                (!pending.is_empty()).then_some((event, pending))
            })
            .collect();
        orphans.shrink_to_fit();
        let orphaned: std::collections::HashSet<String> = orphans.iter().map(|(e, _)| e.id().to_string()).collect();
        self.orphans = orphans;
        self.ended.retain(|(event, _), _| {
            orphaned.contains(event)
                || crate::stripe::ids::EventId::parse(event).is_some_and(|id| payments.events.table.get(&id).is_some())
        });
        if let Some(order) = &mut self.seen_order {
            while order.front().is_some_and(|(t, _)| *t < cutoff_ms) {
                if let Some((_, id)) = order.pop_front() {
                    self.seen.remove(&id);
                }
            }
        }
    }

    /// Publishes the events whose deliveries had not ended; the others count as they
    /// ended. Returns how many deliveries were resumed.
    fn resume_deliveries(&self) -> u64 {
        let events = &self.app.payments.events;
        let deferred = events.take_deferred();
        events.set_publisher(self.app.webhooks.clone());
        let mut resumed = 0;
        // Retired by `--retain` with deliveries pending: the running provider was still
        // delivering them.
        let orphans = self.orphans.iter().map(|(e, ends)| (e.clone(), ends.clone()));
        let kept = deferred.into_iter().filter(|(event, _)| {
            // Gone since (a reset, or past the event TTL): nothing to deliver.
            events.table.get(&event.id()).is_some()
        });
        for (event, endpoints) in orphans.chain(kept) {
            let mut pending = Vec::new();
            for endpoint in endpoints {
                let key = (event.id().to_string(), endpoint.url.to_string());
                match self.ended.get(&key) {
                    Some(true) => event.acknowledged(),
                    Some(false) => event.mark_failed(),
                    None => pending.push(endpoint),
                }
            }
            if !pending.is_empty() {
                resumed += pending.len() as u64;
                self.app.webhooks.publish(&event, &pending);
            }
        }
        resumed
    }
}

/// Runs writes again on a provider being recovered.
struct Replay<'a> {
    app: &'a Arc<Provider>,
    commits: u64,
    /// Writes that answered another status than their record says, and the first.
    diverged: u64,
    first_divergence: Option<String>,
    /// Whether the keys each write touches are noted (for compaction).
    trace: bool,
    /// The endpoint of the last write run again.
    last_endpoint: Option<&'static Endpoint>,
}

impl<'a> Replay<'a> {
    fn new(app: &'a Arc<Provider>) -> Self {
        Self {
            app,
            commits: 0,
            diverged: 0,
            first_divergence: None,
            trace: false,
            last_endpoint: None,
        }
    }

    /// Runs `write` again: the keys it touched (when tracing), and its idempotency key to
    /// restore with its answer. What is left of the record is the caller's to drop (on
    /// two threads, the thread that made it frees it: a free from another thread costs
    /// more, on both).
    fn write(
        &mut self,
        write: &mut Write,
        events: Option<&mut Vec<HandedOff>>,
    ) -> Result<(Touched, Option<Restore>), String> {
        let c = &mut *write.commit;
        let key = write.key.take();
        let request_id = c.request_id;
        let verb = match c.verb.as_str() {
            "POST" => Verb::Post,
            "DELETE" => Verb::Delete,
            other => return Err(format!("unknown method {other}")),
        };
        // Most writes are on the endpoint the last one was.
        let endpoint: &'static Endpoint = match self.last_endpoint {
            Some(e) if e.verb == verb && e.path == c.endpoint => e,
            _ => api::endpoints()
                .chain(api::fauxpay_endpoints())
                .find(|e| e.verb == verb && e.path == c.endpoint)
                .ok_or_else(|| format!("unknown endpoint {} {}", c.verb, c.endpoint))?,
        };
        self.last_endpoint = Some(endpoint);
        // One allocation for the key a client sends with every request, as a live request's.
        let api_key = ApiKey::interned(&c.api_key);
        let params = &c.params;
        let attempt = Attempt {
            request_id,
            idempotency_key: key.clone(),
            correlation_id: write.correlation_id.take(),
            fault: c.fault.as_deref().map(Arc::from),
            decline: c.decline.take().map(|[code, decline_code, message]| Decline {
                code: code.into(),
                decline_code: decline_code.into(),
                message: message.into(),
            }),
            origin: c.origin.as_deref().map(Arc::from),
            key: KeyKind::of(&api_key),
            checkout_session: None,
            clock_offset: 0,
        };
        let call = Call {
            id: &c.id,
            sub: &c.sub,
            params,
            attempt: &attempt,
        };
        let derived = c.derived_event_ids;
        let tokens = std::mem::take(&mut c.tokens);
        let run = || {
            ids::with_event_ids(derived, || {
                ids::scripted(Some(tokens), || {
                    clock::frozen(c.at_ms, || execute_validated(self.app, endpoint, &call))
                })
            })
        };
        let ((result, _), touched) = match (self.trace, events) {
            (true, events) => {
                // Compaction's tracing runs on one thread: events are stored here.
                debug_assert!(events.is_none(), "a write traced and its events handed off");
                trace::touched(run)
            }
            (false, Some(events)) => (handing_off(events, run), Touched::default()),
            (false, None) => (run(), Touched::default()),
        };
        self.commits += 1;
        let now = status_of(&result);
        if let Some(was) = c.status.filter(|was| *was != now) {
            self.diverged += 1;
            self.first_divergence
                .get_or_insert_with(|| format!("{} {} ({}) answered {was}, now {now}", c.verb, c.path, c.request_id));
        }
        let restore = key.map(|key| Restore {
            stored: stored_result(result, c.injected_status, c.fault.as_deref(), request_id),
            fingerprint: match c.fingerprint.first() {
                Some(&digest) => Fingerprint::from_digest(endpoint.path, digest),
                None => Fingerprint::of(endpoint.path, verb.as_str(), &c.path, params),
            },
            api_key,
            key,
            at_ms: c.at_ms,
        });
        Ok((touched, restore))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::commit::{execute_logged, Logged, Written};
    use crate::resources::endpoint::Verb;
    use crate::stripe::params::Params;

    /// Runs `verb path` (an endpoint's pattern, `id` in its place) with `body` on `app` as
    /// a request would at wall-clock time `at_ms`, logged: its answer.
    fn write(app: &Arc<Provider>, at_ms: u64, verb: Verb, path: &str, id: &str, body: &str) -> serde_json::Value {
        let endpoint = api::endpoints()
            .find(|e| e.verb == verb && e.path == path)
            .expect("a served endpoint");
        let params = Params::from_form(body.as_bytes()).unwrap();
        let request_id = RequestId::generate();
        let attempt = Attempt::plain(request_id, None);
        let call = Call {
            id,
            sub: "",
            params: &params,
            attempt: &attempt,
        };
        let key = ApiKey::new("sk_test_retain");
        let written = Written {
            request_id,
            api_key: &key,
            params: &params,
        };
        let logged = Logged {
            injected_status: None,
            counted: None,
            fingerprint: None,
        };
        let concrete = path.replace("{id}", id);
        clock::frozen(at_ms, || {
            execute_logged(app, &written, &concrete, endpoint, &call, logged)
        })
        .map(|r| r.json())
        .unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// `--retain 10s`, as the tests' sweeps retire.
    fn retaining() -> Config {
        Config {
            retain: Some(Duration::from_secs(10)),
            ..Config::default()
        }
    }

    /// An empty directory of its own for a test.
    fn empty_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// `payments` payments from `base` (Unix ms), one a second, orders `{prefix}{i}`, with
    /// `--retain 10s`'s sweep every 5 s as the running provider logs it: how many objects
    /// and records the sweeps retired.
    fn soak(app: &Arc<Provider>, base: u64, payments: u64, prefix: &str) -> usize {
        let mut retired = 0;
        for i in 0..payments {
            let at = base + i * 1000;
            write(
                app,
                at,
                Verb::Post,
                "/v1/payment_intents",
                "",
                &format!(
                    "amount=500&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]={prefix}{i}"
                ),
            );
            if i % 5 == 4 {
                retired += crate::durable::commit::retire_logged(app, at.saturating_sub(10_000));
            }
        }
        retired
    }

    #[test]
    fn under_retain_replay_retires_where_the_provider_did_and_ends_in_its_state() {
        let dir = empty_dir("fauxpay-retain-replay");
        let config = retaining;
        let (app, _) = open(config(), Some(&dir), Fsync::Never).unwrap();
        // A minute of history, a payment a second, the sweep every 5 s; a customer from its
        // start (customers are never retired), charged again at its end.
        let base = clock::now_ms() - 120_000;
        let customer = write(
            &app,
            base,
            Verb::Post,
            "/v1/customers",
            "",
            "email=a@b.co&payment_method=pm_card_visa",
        );
        let card = app
            .payments
            .payment_methods
            .page(crate::state::table::Cursor::Start, 1, |_| true)
            .items[0]
            .id
            .to_string();
        assert!(soak(&app, base, 60, "o") > 0);
        let cus = customer["id"].as_str().unwrap();
        let late = write(
            &app,
            base + 60_000,
            Verb::Post,
            "/v1/payment_intents",
            "",
            &format!("amount=700&currency=usd&confirm=true&customer={cus}&payment_method={card}"),
        );
        assert_eq!(late["status"], "succeeded");
        let live = (
            app.payments.intents.len(),
            app.payments.charges.len(),
            app.payments.events.table.len(),
            app.payments.ledger.records(&Default::default()).len(),
        );
        app.durable().unwrap().close();
        drop(app);

        let (again, summary) = open(config(), Some(&dir), Fsync::Never).unwrap();
        let summary = summary.unwrap();
        assert_eq!(
            (summary.commits, summary.diverged),
            (62, 0),
            "{:?}",
            summary.first_divergence
        );
        let recovered = (
            again.payments.intents.len(),
            again.payments.charges.len(),
            again.payments.events.table.len(),
            again.payments.ledger.records(&Default::default()).len(),
        );
        assert_eq!(recovered, live, "the state the provider had, not the history");
        assert!(live.0 < 20, "{live:?}");
        assert!(again.payments.live_customer(cus).is_some());
        again.durable().unwrap().close();
        drop(again);

        // Recovered without --retain, the log retires where the provider did all the same.
        let (plain, _) = open(Config::default(), Some(&dir), Fsync::Never).unwrap();
        assert_eq!(plain.payments.intents.len(), live.0);
        plain.durable().unwrap().close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Everything the provider keeps, in a form two providers can be compared by (ids,
    /// times and fields; sequence numbers and hashes left out).
    fn state_of(app: &Provider) -> Vec<String> {
        use crate::state::table::Cursor;
        let p = &app.payments;
        let all = usize::MAX - 1;
        vec![
            format!("{:?}", p.intents.page(Cursor::Start, all, |_| true).items),
            format!("{:?}", p.charges.page(Cursor::Start, all, |_| true).items),
            format!("{:?}", p.refunds.page(Cursor::Start, all, |_| true).items),
            format!("{:?}", p.customers.page(Cursor::Start, all, |_| true).items),
            format!("{:?}", p.payment_methods.page(Cursor::Start, all, |_| true).items),
            format!("{:?}", p.products.page(Cursor::Start, all, |_| true).items),
            format!("{:?}", p.prices.page(Cursor::Start, all, |_| true).items),
            format!("{:?}", p.setup_intents.page(Cursor::Start, all, |_| true).items),
            format!("{:?}", p.checkout_sessions.page(Cursor::Start, all, |_| true).items),
            format!("{:?}", p.webhook_endpoints.page(Cursor::Start, all, |_| true).items),
            format!("{:?}", p.events.table.page(Cursor::Start, all, |_| true).items),
            format!("{:?}", p.ledger.records(&Default::default())),
            format!("{:?} {}", p.ledger.totals(), p.ledger.duplicate_group_count()),
            format!("{}", app.idempotency.len()),
        ]
    }

    #[test]
    fn a_compacted_log_recovers_the_same_state_from_far_fewer_records() {
        let dir = empty_dir("fauxpay-compact");
        let config = retaining;
        let (app, _) = open(config(), Some(&dir), Fsync::Never).unwrap();
        assert!(app.durable().unwrap().compacts());
        let base = clock::now_ms() - 200_000;
        let pay = |at: u64, order: &str| {
            write(
                &app,
                at,
                Verb::Post,
                "/v1/payment_intents",
                "",
                &format!("amount=500&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]={order}"),
            )
        };
        // Kept for good: a customer with a saved card, a product and its price, and a
        // duplicate group (one order charged twice).
        let customer = write(
            &app,
            base,
            Verb::Post,
            "/v1/customers",
            "",
            "email=a@b.co&payment_method=pm_card_visa",
        );
        let cus = customer["id"].as_str().unwrap().to_string();
        let product = write(&app, base, Verb::Post, "/v1/products", "", "name=Tee");
        let prod = product["id"].as_str().unwrap().to_string();
        write(
            &app,
            base + 1,
            Verb::Post,
            "/v1/prices",
            "",
            &format!("product={prod}&unit_amount=900&currency=usd"),
        );
        pay(base + 2_000, "twice");
        pay(base + 3_000, "twice");
        // A minute of payments, a sweep every 5 s.
        assert!(soak(&app, base + 10_000, 60, "a") > 0);
        // An intent made before the window and confirmed inside it: its charge stays
        // live while the intent leaves, so its confirm (kept) needs its creation (kept).
        let late = base + 100_000;
        let made = write(
            &app,
            late,
            Verb::Post,
            "/v1/payment_intents",
            "",
            "amount=700&currency=usd&metadata[order_id]=slow",
        );
        let pi = made["id"].as_str().unwrap().to_string();
        write(
            &app,
            late + 9_000,
            Verb::Post,
            "/v1/payment_intents/{id}/confirm",
            &pi,
            "payment_method=pm_card_visa",
        );
        crate::durable::commit::retire_logged(&app, late + 4_000);
        let pi_id = crate::stripe::ids::PaymentIntentId::parse(&pi).unwrap();
        assert!(app.payments.intents.get(&pi_id).is_none(), "the intent left memory");
        // The saved card charged again, and a refund of a live charge.
        let card = app
            .payments
            .payment_methods
            .page(crate::state::table::Cursor::Start, 1, |pm| {
                matches!(
                    pm.attachment,
                    crate::resources::payment_methods::object::Attachment::Customer(_)
                )
            })
            .items[0]
            .id
            .to_string();
        let charged = write(
            &app,
            late + 9_500,
            Verb::Post,
            "/v1/payment_intents",
            "",
            &format!(
                "amount=800&currency=usd&confirm=true&customer={cus}&payment_method={card}&metadata[order_id]=saved"
            ),
        );
        assert_eq!(charged["status"], "succeeded");
        let ch = charged["latest_charge"].as_str().unwrap().to_string();
        write(
            &app,
            late + 9_600,
            Verb::Post,
            "/v1/refunds",
            "",
            &format!("charge={ch}&amount=300"),
        );
        let before = state_of(&app);
        let log_before = std::fs::metadata(dir.join(file::LOG_FILE)).unwrap().len();

        let done = crate::durable::compaction::run(&app, &dir).unwrap();
        assert!(
            done.records_after * 3 < done.records_before,
            "{} records of {} kept",
            done.records_after,
            done.records_before
        );
        assert!(
            done.bytes_after * 2 < log_before,
            "{} bytes of {log_before}",
            done.bytes_after
        );
        assert_eq!(state_of(&app), before, "compaction changes nothing in memory");
        // Written after the compaction, in the new file; then compacted again in the same
        // process (the writer reads the new file's tail back).
        pay(late + 9_700, "after");
        crate::durable::commit::retire_logged(&app, late + 4_500);
        pay(late + 9_800, "after-2");
        crate::durable::compaction::run(&app, &dir).unwrap();
        pay(late + 9_900, "after-3");
        let after = state_of(&app);
        app.durable().unwrap().close();
        drop(app);

        let (again, summary) = open(config(), Some(&dir), Fsync::Never).unwrap();
        let summary = summary.unwrap();
        assert_eq!(summary.diverged, 0, "{:?}", summary.first_divergence);
        assert_eq!(state_of(&again), after, "the state the provider had");
        // Compacted again (now from the recovered records), and still the same.
        crate::durable::compaction::run(&again, &dir).unwrap();
        again.durable().unwrap().close();
        drop(again);
        let (third, summary) = open(config(), Some(&dir), Fsync::Never).unwrap();
        assert_eq!(summary.unwrap().diverged, 0);
        assert_eq!(state_of(&third), after);
        third.durable().unwrap().close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn under_retain_events_retired_with_deliveries_pending_are_still_delivered() {
        let dir = empty_dir("fauxpay-retain-pending");
        // An endpoint that never answers, retried after ten minutes: no delivery ends here.
        let config = || Config {
            webhooks: vec![crate::config::WebhookTarget {
                url: "http://127.0.0.1:9/hook".into(),
                secret: "whsec_pending".into(),
            }],
            delivery: crate::webhooks::Settings {
                retries: vec![Duration::from_secs(600)],
                ..crate::webhooks::Settings::default()
            },
            ..retaining()
        };
        let (app, _) = open(config(), Some(&dir), Fsync::Never).unwrap();
        let base = clock::now_ms() - 60_000;
        soak(&app, base, 20, "p");
        let kept = app.payments.events.table.len();
        // As if the process ended: the log closed and its directory lock released (the
        // delivery thread, still retrying, keeps the data log alive in this process).
        app.durable().unwrap().close();
        app.durable().unwrap().hold_lock(None);
        drop(app);

        let (again, summary) = open(config(), Some(&dir), Fsync::Never).unwrap();
        // Three events a payment (created, charge.succeeded, succeeded), each still owed
        // to the endpoint: the retired ones too, as the running provider kept them queued.
        assert!(kept < 60, "{kept}: some were retired");
        assert_eq!(summary.unwrap().resumed_deliveries, 60);
        assert_eq!(again.payments.events.table.len(), kept);
        again.durable().unwrap().close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A log begun in JSON (schema 3, upgraded) reserves by JSON's bytes a payment, one
    /// begun in binary by binary's, whatever records come before the first write.
    #[test]
    fn the_first_write_says_how_many_bytes_a_payment_takes() {
        let dir = empty_dir("fauxpay-bytes-per-payment");
        let path = dir.join(file::LOG_FILE);
        let log = |records: &[Vec<u8>]| {
            let mut bytes = file::header();
            for r in records {
                file::encode_frame(r, &mut bytes);
            }
            std::fs::write(&path, bytes).unwrap();
        };
        let profile = Record::Profile { source: "x".into() }.to_json();
        let commit = |binary: bool| {
            let c = Commit::example();
            let r = Record::Commit(Box::new(c));
            if binary {
                r.to_bytes()
            } else {
                r.to_json()
            }
        };
        log(&[profile.clone(), commit(false), commit(true)]);
        assert_eq!(file::peek(&path, Record::commit_is_binary), Some(false));
        log(&[profile.clone(), commit(true)]);
        assert_eq!(file::peek(&path, Record::commit_is_binary), Some(true));
        log(&[profile]);
        assert_eq!(file::peek(&path, Record::commit_is_binary), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_sparse_tail_reserves_nothing() {
        let dir = std::env::temp_dir().join(format!("fauxpay-sparse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = std::fs::File::create(dir.join(file::LOG_FILE)).unwrap();
        std::io::Write::write_all(&mut &log, &[b'x'; 64 << 10]).unwrap();
        log.set_len(16 << 30).unwrap(); // 16 GiB long, 64 KiB of it on disk
        let reserved = payments_in_log(&dir);
        assert!(
            reserved <= (64 << 10) / LOG_BYTES_PER_PAYMENT as usize + 16,
            "{reserved}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `n` keyed payments through the whole request path (faults, idempotency, the log),
    /// keys `{prefix}{i}`, each sent twice (the second a replay).
    fn keyed(app: &Arc<Provider>, prefix: &str, n: usize) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let key = ApiKey::new("sk_test_two_threads");
        runtime.block_on(async {
            for i in 0..n {
                let body = format!(
                    "amount={}&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]={prefix}{i}",
                    100 + i
                );
                for _ in 0..2 {
                    let status =
                        crate::post_in_process(app, &key, "/v1/payment_intents", Some(&format!("{prefix}{i}")), &body)
                            .await;
                    assert_eq!(status, 200, "{prefix}{i}");
                }
            }
        });
    }

    /// Where every event of [`mixed_log`] is owed: an endpoint at `url` (a
    /// [`refusing_url`]) that refuses each delivery
    /// and retries only after ten minutes, one delivery at a time. So no delivery ends by
    /// itself during a test, and deliveries are attempted in the order they were queued.
    fn watched(url: &str) -> Config {
        Config {
            webhooks: vec![crate::config::WebhookTarget {
                url: url.into(),
                secret: "whsec_two_threads".into(),
            }],
            delivery: crate::webhooks::Settings {
                retries: vec![Duration::from_secs(600)],
                concurrency: 1,
                ..crate::webhooks::Settings::default()
            },
            ..Config::default()
        }
    }

    /// A local port that refuses every connection for as long as the socket lives: bound,
    /// never listening, so nothing else can take it. Its URL, and the socket.
    fn refusing_url() -> (String, tokio::net::TcpSocket) {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let url = format!("http://{}/hook", socket.local_addr().unwrap());
        (url, socket)
    }

    /// The log of [`keyed`] payments across every kind of record that waits for the writes
    /// before it (a profile, a reset, the ledger's totals and sequence), more than a batch
    /// of writes on each side, deliveries that ended (acknowledged or given up) before
    /// and after those records, and one write repeated. Every event is owed to
    /// [`watched`]'s endpoint. The live provider's state when it ended ([`comparable`]).
    fn mixed_log(dir: &Path, url: &str) -> Vec<String> {
        use crate::state::table::Cursor;
        let (app, _) = open_with(watched(url), Some(dir), Fsync::Never, Threads::One).unwrap();
        keyed(&app, "a", 300);
        let source = "name = \"second\"\ndescription = \"a profile swapped mid-log\"\nseed = 7\n";
        app.swap_profile(faults::parse_profile_text("a test", source).unwrap(), source.into());
        app.reset();
        keyed(&app, "b", BATCH + 40);
        let log = app.durable().unwrap();
        let events = app.payments.events.table.page(Cursor::Start, 13, |_| true).items;
        // A delivery that ends, as the delivery thread ends one: the event's state, then
        // the record.
        let ended = |event: &Event, ok: bool| {
            if ok {
                event.acknowledged();
            } else {
                event.mark_failed();
            }
            log.append(&Record::Delivered {
                event: event.id().to_string(),
                url: url.into(),
                ok,
            })
        };
        for (i, event) in events[..10].iter().enumerate() {
            ended(event, i % 2 == 0);
        }
        log.append(&Record::Totals(app.payments.ledger.totals()));
        log.append(&Record::Sequence {
            ledger: app.payments.ledger.last_seq(),
        });
        keyed(&app, "c", 20);
        for event in &events[10..] {
            ended(event, true);
        }
        log.close();
        let live = comparable(&app);
        // As if the process ended (its delivery thread, still retrying, keeps the data
        // log and its directory lock alive in this one).
        log.hold_lock(None);
        drop(app);
        // The last write once more, as a retried append could leave it.
        let path = dir.join(file::LOG_FILE);
        let bytes = std::fs::read(&path).unwrap();
        let mut frames = Vec::new();
        let mut at = file::HEADER_LEN as usize;
        while at + 8 <= bytes.len() {
            let end = at + 8 + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            frames.push(at..end);
            at = end;
        }
        let last = frames
            .iter()
            .rev()
            .find(|f| matches!(Record::from_bytes(&bytes[f.start + 8..f.end]), Ok(Record::Commit(_))))
            .unwrap()
            .clone();
        let mut again = bytes.clone();
        again.extend_from_slice(&bytes[last]);
        std::fs::write(&path, again).unwrap();
        live
    }

    /// [`state_of`], with `--webhook`'s endpoint compared by its URL: each start makes it
    /// anew (its id and time drawn then).
    fn comparable(app: &Provider) -> Vec<String> {
        use crate::state::table::Cursor;
        let mut state = state_of(app);
        let endpoints = app.payments.webhook_endpoints.page(Cursor::Start, 10, |_| true).items;
        state[9] = format!("{:?}", endpoints.iter().map(|e| &e.url).collect::<Vec<_>>());
        state
    }

    #[test]
    fn two_threads_recover_exactly_what_one_does() {
        let dir = empty_dir("fauxpay-two-threads");
        let (url, _refusing) = refusing_url();
        let live = mixed_log(&dir, &url);
        // The same log for each (the retries below are logged).
        let copy = empty_dir("fauxpay-two-threads-copy");
        std::fs::copy(dir.join(file::LOG_FILE), copy.join(file::LOG_FILE)).unwrap();
        let recover = |dir: &Path, threads| {
            let (app, summary) = open_with(watched(&url), Some(dir), Fsync::Never, threads).unwrap();
            let summary = summary.unwrap();
            // The deliveries resumed, in the order they were queued: each one's first
            // attempt is refused and waits ten minutes to retry.
            let resumed = summary.resumed_deliveries;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let (all_tried, counts) = runtime.block_on(
                app.webhooks
                    .wait_until(Duration::from_secs(60), |w| w.counts().retrying == resumed),
            );
            assert!(all_tried, "{threads:?}: {resumed} resumed, {counts:?}");
            let mut attempts: Vec<String> = app
                .webhooks
                .log
                .recent(usize::MAX, |_| true)
                .iter()
                .map(|r| r.event.to_string())
                .collect();
            attempts.reverse();
            let state = comparable(&app);
            // Every key was restored: its retry is answered, and makes no payment.
            let before = app.payments.intents.len();
            keyed(&app, "b", 3);
            assert_eq!(app.payments.intents.len(), before, "{threads:?}");
            app.durable().unwrap().close();
            (
                (
                    summary.records,
                    summary.commits,
                    summary.repeats,
                    summary.diverged,
                    resumed,
                ),
                state,
                before,
                attempts,
            )
        };
        let one = recover(&dir, Threads::One);
        let two = recover(&copy, Threads::Two);
        // Which of `state_of`'s stores differ (the whole state is too long to print).
        let differ: Vec<usize> = (0..one.1.len()).filter(|&i| one.1[i] != two.1[i]).collect();
        assert!(
            one.0 == two.0 && differ.is_empty() && one.2 == two.2,
            "one thread {:?}, two {:?}; stores that differ: {differ:?}",
            (one.0, one.2),
            (two.0, two.2)
        );
        let first_apart = one.3.iter().zip(&two.3).position(|(a, b)| a != b);
        assert!(
            one.3.len() == two.3.len() && first_apart.is_none(),
            "deliveries resumed in another order: {} and {} attempts, first apart at {first_apart:?}",
            one.3.len(),
            two.3.len()
        );
        // And both recovered what the live provider held when it ended, not only the same.
        let unlike_live: Vec<usize> = (0..live.len()).filter(|&i| live[i] != one.1[i]).collect();
        assert!(
            unlike_live.is_empty(),
            "stores unlike the live provider's: {unlike_live:?}"
        );
        let ((_, commits, repeats, diverged, resumed), _, intents, attempts) = one;
        assert_eq!(
            (commits, repeats, diverged, intents),
            (300 + BATCH as u64 + 40 + 20, 1, 0, BATCH + 40 + 20)
        );
        // Three events a payment since the reset, less the 13 deliveries that ended.
        assert_eq!(resumed, 3 * (BATCH as u64 + 40 + 20) - 13);
        assert_eq!(attempts.len() as u64, resumed);
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&copy);
    }

    #[test]
    fn a_write_that_fails_again_is_named_alike_and_leaves_the_log_on_one_thread_or_two() {
        let dir = empty_dir("fauxpay-two-threads-fail");
        let (app, _) = open_with(Config::default(), Some(&dir), Fsync::Never, Threads::One).unwrap();
        keyed(&app, "f", BATCH + 10);
        let log = app.durable().unwrap();
        log.append(&Record::Commit(Box::new(Commit {
            endpoint: "/v1/not_served".into(),
            ..Commit::example()
        })));
        log.close();
        drop(app);
        // And a torn last write after it: a recovery that fails cuts nothing.
        let path = dir.join(file::LOG_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&[7, 0, 0, 0, 1, 2]);
        std::fs::write(&path, &bytes).unwrap();
        let error = |threads| match open_with(Config::default(), Some(&dir), Fsync::Never, threads) {
            Ok(_) => panic!("{threads:?}: recovered a write on an endpoint not served"),
            Err(e) => {
                assert!(std::fs::read(&path).unwrap() == bytes, "{threads:?} changed the log");
                e.to_string()
            }
        };
        let one = error(Threads::One);
        assert!(one.contains("unknown endpoint POST /v1/not_served"), "{one}");
        assert_eq!(error(Threads::Two), one);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
