//! A write made durable: with a data dir, each write runs alone at a stopped wall clock
//! with its ids written down, and its record is appended to the log (when it ran), so
//! that recovery runs it again to the same objects and the same answer. The attempt the
//! fault engine counted for a request is logged inside that record, or on its own.

use crate::app::Provider;
use crate::durable::record::Commit;
use crate::durable::{DataLog, Record as DataRecord};
use crate::error::ApiError;
use crate::idempotency::Fingerprint;
use crate::pipeline::execute::{execute, status_of};
use crate::reply::Reply;
use crate::resources::endpoint::{Call, Endpoint};
use crate::state::{clock, trace};
use crate::stripe::ids::{self, ApiKey, RequestId};
use crate::stripe::params::Params;

/// The request a write's record keeps, beside what its [`Call`] says.
pub struct Written<'a> {
    pub request_id: RequestId,
    pub api_key: &'a ApiKey,
    pub params: &'a Params,
}

/// [`execute`] with a data dir: one write at a time, at a stopped wall clock and with
/// its ids written down, then its record appended (when it ran), so that recovery runs
/// it again to the same objects.
pub fn execute_logged(
    app: &Provider,
    req: &Written<'_>,
    path: &str,
    endpoint: &Endpoint,
    call: &Call<'_>,
    logged: Logged<'_, '_>,
) -> Result<Reply, ApiError> {
    let Logged {
        injected_status,
        counted,
        fingerprint,
    } = logged;
    let Some(log) = app.durable() else {
        return execute(app, endpoint, call);
    };
    let params = req.params.clone();
    let _order = log.commit_lock();
    let at_ms = clock::now_ms();
    let run = || ids::scripted(None, || clock::frozen(at_ms, || execute(app, endpoint, call)));
    // With compaction on, the keys it touches and the ledger's sequence number before
    // it are kept beside its record.
    let (ledger_seq, ((result, tokens), touched)) = match log.compacts() {
        true => (app.payments.ledger.last_seq(), trace::touched(run)),
        false => (0, (run(), trace::Touched::default())),
    };
    if !matches!(&result, Err(e) if !e.executed) {
        let attempt = call.attempt;
        let counted = counted.map(|c| {
            c.in_commit = true;
            c.n
        });
        log.append_touching(
            &DataRecord::Commit(Box::new(Commit {
                at_ms,
                request_id: req.request_id,
                api_key: req.api_key.as_str().to_owned(),
                verb: endpoint.verb.as_str().to_owned(),
                endpoint: endpoint.path.to_owned(),
                path: path.to_owned(),
                id: call.id.to_owned(),
                sub: call.sub.to_owned(),
                params,
                idempotency_key: attempt.idempotency_key.as_ref().map(|k| k.as_str().to_owned()),
                fingerprint: fingerprint.map(|f| f.digest()).into_iter().collect(),
                correlation_id: attempt.correlation_id.as_ref().map(|c| c.as_str().to_owned()),
                fault: attempt.fault.as_deref().map(str::to_owned),
                decline: attempt
                    .decline
                    .as_ref()
                    .map(|d| [d.code.to_string(), d.decline_code.to_string(), d.message.to_string()]),
                origin: attempt.origin.as_deref().map(str::to_owned),
                tokens,
                attempt: counted,
                injected_status,
                status: Some(status_of(&result)),
                // A live request derives them ([`EventId::nth`](crate::stripe::ids::EventId::nth)).
                derived_event_ids: true,
            })),
            touched,
            ledger_seq,
        );
    }
    result
}

/// `--retain`'s sweep: retires what was created before `cutoff_ms` and, with a data dir,
/// logs the cutoff at this point of the log (in order with the writes), so that recovery
/// retires the same at the same point. Says how many objects and records left.
pub fn retire_logged(app: &Provider, cutoff_ms: u64) -> usize {
    let Some(log) = app.durable() else {
        return app.payments.retire_before(cutoff_ms);
    };
    let _order = log.commit_lock();
    let retired = app.payments.retire_before(cutoff_ms);
    // Nothing retired: the same state retires nothing when replayed either.
    if retired > 0 {
        log.append(&DataRecord::Retired { cutoff_ms });
    }
    retired
}

/// What a write's record says beside the request itself.
pub struct Logged<'c, 'l> {
    /// A 5xx a fault puts in place of the answer after the commit.
    pub injected_status: Option<u16>,
    pub counted: Option<&'c mut CountedAttempt<'l>>,
    /// The idempotency fingerprint, when the request has a key.
    pub fingerprint: Option<Fingerprint>,
}

/// With a data dir, the attempt the fault engine counted for a request: logged inside
/// its write's record when it made one, else on its own when the request ends.
pub struct CountedAttempt<'a> {
    pub log: &'a DataLog,
    pub identity: crate::state::thin::ThinStr,
    pub n: u32,
    pub in_commit: bool,
}

impl Drop for CountedAttempt<'_> {
    fn drop(&mut self) {
        if !self.in_commit {
            self.log.append(&DataRecord::Attempt {
                identity: self.identity.to_string(),
                n: self.n,
                at_ms: clock::now_ms(),
            });
        }
    }
}
