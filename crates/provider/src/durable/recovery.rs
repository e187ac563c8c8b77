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
use crate::idempotency::Fingerprint;
use crate::pipeline::execute::{execute_validated, status_of};
use crate::resources as api;
use crate::resources::endpoint::{Call, Endpoint, Verb};
use crate::resources::events::object::Event;
use crate::resources::events::store::{Deferred, Publisher};
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
    let Some(dir) = dir else {
        return Ok((Provider::new(config), None));
    };
    let started = Instant::now();
    // With --retain the live state is a window, not the history: nothing is reserved
    // from the log's size (its history), and replay retires as the provider did.
    let retain = config.retain;
    let app = Provider::recovering(config);
    let mut replay = Replay::new(&app);
    if retain.is_none() {
        let payments = payments_in_log(dir);
        app.reserve(payments);
        // Best effort, as `Provider::reserve`: one request id a write.
        let _ = replay.seen.try_reserve(payments);
    }
    // With --retain the log is compacted: what compaction needs of each record is kept,
    // and the keys each write touches are noted as it runs again.
    let mut metas = retain.map(|_| Vec::new());
    replay.trace = metas.is_some();
    let (log_file, mut found) = file::open(dir, |_, offset, payload| {
        let record = Record::from_bytes(payload).map_err(|e| format!("not a record: {e}"))?;
        let seq = replay.app.payments.ledger.last_seq();
        let meta = metas
            .as_ref()
            .map(|_| Meta::of(&record, offset, 8 + payload.len() as u64, Touched::default(), seq));
        let touched = replay.apply(record)?;
        if let (Some(metas), Some(mut meta)) = (metas.as_mut(), meta) {
            if let Kind::Commit { touched: t, owed, .. } = &mut meta.kind {
                *t = touched.keys.into_boxed_slice();
                *owed = touched.owed.into_boxed_slice();
            }
            metas.push(meta);
        }
        Ok(())
    })?;
    let resumed = replay.resume_deliveries();
    let (commits, diverged, first_divergence, repeats) = (
        replay.commits,
        replay.diverged,
        replay.first_divergence.take(),
        replay.repeats,
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

/// Runs records again on a provider being recovered.
struct Replay<'a> {
    app: &'a Arc<Provider>,
    /// Now, on the wall clock and the provider's clock (keys' and attempts' ages are
    /// measured from it).
    now_ms: u64,
    now: Instant,
    commits: u64,
    /// Writes that answered another status than their record says, and the first.
    diverged: u64,
    first_divergence: Option<String>,
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
    /// Whether the keys each write touches are noted (for compaction).
    trace: bool,
    /// The endpoint of the last write run again.
    last_endpoint: Option<&'static Endpoint>,
}

impl<'a> Replay<'a> {
    fn new(app: &'a Arc<Provider>) -> Self {
        Self {
            app,
            now_ms: clock::now_ms(),
            now: app.clock.now(),
            commits: 0,
            diverged: 0,
            first_divergence: None,
            ended: HashMap::new(),
            seen: std::collections::HashSet::default(),
            repeats: 0,
            seen_order: app.config.retain.map(|_| std::collections::VecDeque::new()),
            orphans: Vec::new(),
            trace: false,
            last_endpoint: None,
        }
    }

    fn age(&self, at_ms: u64) -> Duration {
        Duration::from_millis(self.now_ms.saturating_sub(at_ms))
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

    /// Runs `record` again; returns the keys it touched (a write's, when tracing).
    fn apply(&mut self, record: Record) -> Result<Touched, String> {
        let mut touched = Touched::default();
        match record {
            Record::Commit(c) => {
                let request_id = c.request_id;
                if !self.seen.insert(request_id) {
                    self.repeats += 1;
                    return Ok(touched);
                }
                if let Some(order) = &mut self.seen_order {
                    order.push_back((c.at_ms, request_id));
                }
                touched = self.commit(*c, request_id)?;
                self.commits += 1;
            }
            Record::Attempt { identity, n, at_ms } => {
                self.app
                    .faults
                    .restore_attempt(identity.into(), n, self.now, self.age(at_ms));
            }
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
            Record::Delivered { event, url, ok } => {
                self.ended.insert((event, url), ok);
            }
            Record::Totals(totals) => self.app.payments.ledger.set_totals(&totals),
            Record::Sequence { ledger } => self.app.payments.ledger.set_last_seq(ledger),
        }
        Ok(touched)
    }

    fn commit(&mut self, c: Commit, request_id: RequestId) -> Result<Touched, String> {
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
        let params = c.params;
        let key = c
            .idempotency_key
            .as_deref()
            .map(IdempotencyKey::parse)
            .transpose()
            .map_err(|e| format!("idempotency key: {e}"))?;
        let attempt = Attempt {
            request_id,
            idempotency_key: key.clone(),
            correlation_id: c.correlation_id.as_deref().map(CorrelationId::new),
            fault: c.fault.as_deref().map(Arc::from),
            decline: c.decline.map(|[code, decline_code, message]| Decline {
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
            params: &params,
            attempt: &attempt,
        };
        if let (Some(n), Some(identity)) = (
            c.attempt,
            counted_identity(key.as_ref(), attempt.correlation_id.as_ref()),
        ) {
            self.app
                .faults
                .restore_attempt(identity, n, self.now, self.age(c.at_ms));
        }
        let derived = c.derived_event_ids;
        let run = || {
            ids::with_event_ids(derived, || {
                ids::scripted(Some(c.tokens), || {
                    clock::frozen(c.at_ms, || execute_validated(self.app, endpoint, &call))
                })
            })
        };
        let ((result, _), touched) = match self.trace {
            true => trace::touched(run),
            false => (run(), Touched::default()),
        };
        let now = status_of(&result);
        if let Some(was) = c.status.filter(|was| *was != now) {
            self.diverged += 1;
            self.first_divergence
                .get_or_insert_with(|| format!("{} {} ({}) answered {was}, now {now}", c.verb, c.path, c.request_id));
        }
        if let Some(key) = key {
            let stored = stored_result(result, c.injected_status, c.fault.as_deref(), request_id);
            let fingerprint = match c.fingerprint.first() {
                Some(&digest) => Fingerprint::from_digest(endpoint.path, digest),
                None => Fingerprint::of(endpoint.path, verb.as_str(), &c.path, &params),
            };
            self.app
                .idempotency
                .restore(&api_key, &key, fingerprint, stored, self.now, self.age(c.at_ms));
        }
        Ok(touched)
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
        // delivery thread, still retrying, keeps the provider alive in this process).
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
}
