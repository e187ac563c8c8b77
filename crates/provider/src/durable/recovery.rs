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
use crate::resources::events::store::Publisher;
use crate::state::clock;
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
    let app = Provider::recovering(config);
    app.reserve(payments_in_log(dir));
    let mut replay = Replay::new(&app);
    let (log_file, mut found) = file::open(dir, |_, _, payload| {
        let record = Record::from_bytes(payload).map_err(|e| format!("not a record: {e}"))?;
        replay.apply(record)
    })?;
    let resumed = replay.resume_deliveries();
    let (commits, diverged, first_divergence, repeats) = (
        replay.commits,
        replay.diverged,
        replay.first_divergence.take(),
        replay.repeats,
    );
    drop(replay);
    let log = DataLog::start(log_file, fsync).map_err(|source| DataDirError::Io {
        dir: dir.to_path_buf(),
        source,
    })?;
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

/// About the fewest bytes a confirmed payment's record takes in the log (the benchmark's
/// 1,000,000 payments make 682 MB, ~700 bytes each): the log's length divided by it is
/// the most payments it can hold, which recovery makes room for before replaying.
const LOG_BYTES_PER_PAYMENT: u64 = 640;

/// How many payments `dir`'s log can hold at most (0 when there is none yet).
fn payments_in_log(dir: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    // The bytes the file holds on disk, not its length: a sparse tail (a crash on some
    // file systems leaves one; 16 GiB of it used to reserve 504 MB) holds none.
    let bytes = std::fs::metadata(dir.join(file::LOG_FILE)).map_or(0, |m| m.len().min(m.blocks() * 512));
    usize::try_from(bytes / LOG_BYTES_PER_PAYMENT).unwrap_or(usize::MAX)
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
    /// is skipped, not run twice.
    seen: std::collections::HashSet<RequestId>,
    /// Records skipped as repeats of an earlier one.
    repeats: u64,
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
            seen: std::collections::HashSet::new(),
            repeats: 0,
        }
    }

    fn age(&self, at_ms: u64) -> Duration {
        Duration::from_millis(self.now_ms.saturating_sub(at_ms))
    }

    fn apply(&mut self, record: Record) -> Result<(), String> {
        match record {
            Record::Commit(c) => {
                let request_id =
                    RequestId::parse(&c.request_id).ok_or_else(|| format!("request id {}", c.request_id))?;
                if !self.seen.insert(request_id) {
                    self.repeats += 1;
                    return Ok(());
                }
                self.commit(*c, request_id)?;
                self.commits += 1;
            }
            Record::Attempt { identity, n, at_ms } => {
                self.app.faults.restore_attempt(&identity, n, self.now, self.age(at_ms));
            }
            Record::Profile { source } => {
                let profile = faults::parse_profile_text("the data dir's profile", &source)
                    .map_err(|e| format!("its fault profile no longer parses: {}", e.lines().join("; ")))?;
                self.app.swap_profile(profile, source);
            }
            Record::Reset => self.app.reset(),
            Record::Delivered { event, url, ok } => {
                self.ended.insert((event, url), ok);
            }
        }
        Ok(())
    }

    fn commit(&mut self, c: Commit, request_id: RequestId) -> Result<(), String> {
        let verb = match c.verb.as_str() {
            "POST" => Verb::Post,
            "DELETE" => Verb::Delete,
            other => return Err(format!("unknown method {other}")),
        };
        let endpoint: &Endpoint = api::endpoints()
            .chain(api::fauxpay_endpoints())
            .find(|e| e.verb == verb && e.path == c.endpoint)
            .ok_or_else(|| format!("unknown endpoint {} {}", c.verb, c.endpoint))?;
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
            key: KeyKind::of(&ApiKey::new(&c.api_key)),
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
                .restore_attempt(&identity, n, self.now, self.age(c.at_ms));
        }
        let (result, _) = ids::scripted(Some(c.tokens), || {
            clock::frozen(c.at_ms, || execute_validated(self.app, endpoint, &call))
        });
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
            self.app.idempotency.restore(
                &ApiKey::new(&c.api_key),
                &key,
                fingerprint,
                stored,
                self.now,
                self.age(c.at_ms),
            );
        }
        Ok(())
    }

    /// Publishes the events whose deliveries had not ended; the others count as they
    /// ended. Returns how many deliveries were resumed.
    fn resume_deliveries(&self) -> u64 {
        let events = &self.app.payments.events;
        let deferred = events.take_deferred();
        events.set_publisher(self.app.webhooks.clone());
        let mut resumed = 0;
        for (event, endpoints) in deferred {
            // Gone since (a reset, or past the event TTL): nothing to deliver.
            if events.table.get(&event.id).is_none() {
                continue;
            }
            let mut pending = Vec::new();
            for endpoint in endpoints {
                let key = (event.id.to_string(), endpoint.url.to_string());
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
