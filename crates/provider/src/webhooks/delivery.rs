//! [`Webhooks`]: the delivery engine. A published event becomes one job per endpoint
//! that wants it, queued on that endpoint's lane; each lane runs at most
//! [`Settings::concurrency`] deliveries at once, as tokio tasks, so the request that
//! published the event never waits (a full lane only makes the queue longer: nothing is
//! dropped, nothing blocks). An attempt that fails (not a 2xx, a timeout, a connection
//! error, or a delivery fault) waits the next step of [`Settings::retries`] and is queued
//! again; after the last it is logged as given up and its event counted as failed.
//! [`Webhooks::drain`] waits, woken whenever an attempt ends or a retry is queued again (no
//! polling), until nothing is queued, in flight or waiting to retry.
//!
//! Deliveries run on their own thread ([`DeliveryThread`]) at a low CPU priority (nice
//! 10 on Linux): when the API saturates the CPU it keeps ~90% of it, and deliveries
//! queue and go out with the rest (they are at least once and asynchronous, as at
//! Stripe); when the CPU has room, as in nearly every run against a real merchant, they
//! go out at once. Nice 19 starved them behind any busy process: the demo test took 70 s
//! instead of 10 s next to two CPU-bound processes. Measured in bench/run.sh's `webhooks`
//! row and bench/notes.md.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::Notify;

use super::log::{DeliveryLog, DeliveryRecord, Outcome};
use super::signature;
use crate::durable::{DataLog, Record};
use crate::fault_injection::FaultInjector;
use crate::http::webhook_client::{Client, SendError};
use crate::metrics::WebhookMetrics;
use crate::resources::events::object::Event;
use crate::resources::events::store::Publisher;
use crate::resources::webhook_endpoints::object::WebhookEndpoint;
use crate::state::clock::now_ms;
use crate::state::clock::now_unix;
use crate::stripe::ids::WebhookEndpointId;
use fauxpay_faults::{DeliveryFacts, DeliveryFault, Forgery};

/// How far back a `stale_timestamp` forgery dates its signature (past the libraries'
/// 300-second tolerance).
const STALE_BY_SECS: i64 = 600;
/// The secret a `wrong_secret` forgery signs with.
const FORGED_SECRET: &str = "whsec_fauxpay_forged_signature_key";

/// How deliveries are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The waits before each retry; their number is the number of retries.
    pub retries: Vec<Duration>,
    /// A delivery not answered within this is a failure.
    pub timeout: Duration,
    /// Deliveries in flight at once, per endpoint.
    pub concurrency: usize,
}

/// Stripe's test-mode schedule (retries over a few days, then given up), compressed for
/// local use: 1 s, 10 s, 1 min, 5 min.
pub const DEFAULT_RETRIES: [Duration; 4] = [
    Duration::from_secs(1),
    Duration::from_secs(10),
    Duration::from_secs(60),
    Duration::from_secs(300),
];

impl Default for Settings {
    fn default() -> Self {
        Self {
            retries: DEFAULT_RETRIES.to_vec(),
            timeout: Duration::from_secs(10),
            concurrency: 32,
        }
    }
}

/// Parses a retry schedule: comma-separated durations (`1s,10s,1m,5m`); `none` or an
/// empty string for no retries.
pub fn parse_retries(s: &str) -> Result<Vec<Duration>, String> {
    let s = s.trim();
    if s.is_empty() || s == "none" {
        return Ok(Vec::new());
    }
    let waits = s
        .split(',')
        .map(|w| humantime::parse_duration(w.trim()).map_err(|e| format!("'{}': {e}", w.trim())))
        .collect::<Result<Vec<_>, _>>()?;
    if waits.len() > 32 {
        return Err("at most 32 retries".into());
    }
    Ok(waits)
}

/// What the engine is doing, for `GET /__fauxpay/webhooks` and drain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub queued: u64,
    pub in_flight: u64,
    pub retrying: u64,
    /// Deliveries acknowledged (a 2xx).
    pub delivered: u64,
    /// Deliveries given up after their last retry.
    pub failed: u64,
}

impl Counts {
    /// Deliveries not finished yet.
    pub fn pending(&self) -> u64 {
        self.queued + self.in_flight + self.retrying
    }
}

/// One delivery to do: an event to an endpoint, its attempt number.
struct Job {
    event: Event,
    endpoint: Arc<WebhookEndpoint>,
    attempt: u32,
    resend: bool,
}

#[derive(Default)]
struct LaneState {
    queue: VecDeque<Job>,
    active: usize,
}

/// One endpoint's queue.
#[derive(Default)]
struct Lane(Mutex<LaneState>);

/// What one send came to.
struct Sent {
    result: Outcome,
    status: Option<u16>,
    error: Option<String>,
    latency: Option<Duration>,
}

/// The deliveries' own thread: a current-thread tokio runtime at [`NICE`]; stopped when
/// the engine is dropped.
struct DeliveryThread {
    handle: tokio::runtime::Handle,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl DeliveryThread {
    fn start() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("fauxpay-webhooks".into())
            .spawn(move || {
                low_priority();
                // Returns when the sender drops; the runtime (its deliveries) ends with it.
                let _ = runtime.block_on(stopped);
            })?;
        Ok(Self { handle, _stop: stop })
    }
}

/// The delivery thread's nice value: a nice-0 thread gets ~10x its CPU when both want it.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const NICE: i32 = 10;

/// Lowers this thread's CPU priority to [`NICE`] (any process may lower its own).
#[cfg(target_os = "linux")]
fn low_priority() {
    // On Linux a thread id names one thread to setpriority.
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), NICE) {
        tracing::debug!("webhook deliveries keep their CPU priority: {e}");
    }
}

#[cfg(not(target_os = "linux"))]
fn low_priority() {}

/// The delivery engine; see the module docs.
pub struct Webhooks {
    thread: DeliveryThread,
    me: Weak<Webhooks>,
    settings: Settings,
    client: Client,
    faults: Arc<FaultInjector>,
    metrics: WebhookMetrics,
    lanes: Mutex<HashMap<WebhookEndpointId, Arc<Lane>>>,
    queued: AtomicU64,
    in_flight: AtomicU64,
    retrying: AtomicU64,
    delivered: AtomicU64,
    failed: AtomicU64,
    /// Deliveries (and duplicate copies) not finished for good, whatever their state: one
    /// counter, so drain never sees a delivery between two states as none.
    outstanding: AtomicU64,
    /// Woken whenever an attempt ends or a retry is queued again (drain waits on it).
    changed: Notify,
    pub log: DeliveryLog,
    /// With `--data-dir`: where a delivery's end is recorded (so recovery resumes only
    /// the deliveries that had not ended).
    data_log: OnceLock<Arc<DataLog>>,
}

impl Webhooks {
    pub fn new(settings: Settings, faults: Arc<FaultInjector>, metrics: WebhookMetrics) -> Arc<Self> {
        let client = Client::new(settings.concurrency.max(1) * 2);
        // Without a thread of its own (the OS refused one) nothing can be delivered.
        let thread =
            DeliveryThread::start().unwrap_or_else(|e| panic!("cannot start the webhook delivery thread: {e}"));
        Arc::new_cyclic(|me| Self {
            thread,
            me: me.clone(),
            settings,
            client,
            faults,
            metrics,
            lanes: Mutex::default(),
            queued: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            retrying: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            outstanding: AtomicU64::new(0),
            changed: Notify::new(),
            log: DeliveryLog::default(),
            data_log: OnceLock::new(),
        })
    }

    /// Records every delivery's end in `log` from now on.
    pub fn attach_data_log(&self, log: Arc<DataLog>) {
        let _ = self.data_log.set(log);
    }

    fn record_end(&self, job: &Job, ok: bool) {
        if let Some(log) = self.data_log.get() {
            log.append(&Record::Delivered {
                event: job.event.id().to_string(),
                url: job.endpoint.url.to_string(),
                ok,
            });
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn counts(&self) -> Counts {
        Counts {
            queued: self.queued.load(Ordering::SeqCst),
            in_flight: self.in_flight.load(Ordering::SeqCst),
            retrying: self.retrying.load(Ordering::SeqCst),
            delivered: self.delivered.load(Ordering::SeqCst),
            failed: self.failed.load(Ordering::SeqCst),
        }
    }

    /// Waits until no delivery is queued, in flight or waiting to retry, or `timeout`
    /// passes; says whether it drained, with the counts at that moment.
    pub async fn drain(&self, timeout: Duration) -> (bool, Counts) {
        self.wait_until(timeout, |w| w.outstanding.load(Ordering::SeqCst) == 0)
            .await
    }

    /// Waits until `done` holds, checked whenever an attempt ends or a retry is queued
    /// again, or `timeout` passes; says whether it held, with the counts at that moment.
    pub async fn wait_until(&self, timeout: Duration, done: impl Fn(&Self) -> bool) -> (bool, Counts) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            // Registered before the check, so a change right after it still wakes us.
            notified.as_mut().enable();
            if done(self) {
                return (true, self.counts());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return (done(self), self.counts());
            }
        }
    }

    /// Delivers `event` again to `endpoints` (as Stripe's dashboard resends one).
    pub fn resend(&self, event: &Event, endpoints: &[Arc<WebhookEndpoint>]) {
        for endpoint in endpoints {
            // An acknowledged event is pending again until the resend is acknowledged.
            if event.delivered() {
                event.pending_again();
            }
            self.outstanding.fetch_add(1, Ordering::SeqCst);
            self.enqueue(Job {
                event: event.clone(),
                endpoint: endpoint.clone(),
                attempt: 1,
                resend: true,
            });
        }
    }

    /// Forgets the log and the delivered / failed counts (queued deliveries go on).
    pub fn reset(&self) {
        self.log.clear();
        self.delivered.store(0, Ordering::SeqCst);
        self.failed.store(0, Ordering::SeqCst);
    }

    fn lane(&self, id: WebhookEndpointId) -> Arc<Lane> {
        self.lanes.lock().entry(id).or_default().clone()
    }

    fn enqueue(&self, job: Job) {
        let lane = self.lane(job.endpoint.id);
        self.queued.fetch_add(1, Ordering::SeqCst);
        self.metrics.queued.inc();
        lane.0.lock().queue.push_back(job);
        self.pump(&lane);
    }

    /// Starts queued jobs, on the delivery thread, while the lane has room.
    fn pump(&self, lane: &Arc<Lane>) {
        let Some(me) = self.me.upgrade() else {
            return;
        };
        loop {
            let job = {
                let mut state = lane.0.lock();
                if state.active >= self.settings.concurrency.max(1) {
                    return;
                }
                let Some(job) = state.queue.pop_front() else {
                    return;
                };
                state.active += 1;
                job
            };
            // In flight before no longer queued: drain never sees a gap.
            self.in_flight.fetch_add(1, Ordering::SeqCst);
            self.queued.fetch_sub(1, Ordering::SeqCst);
            self.metrics.queued.dec();
            let (me, lane) = (me.clone(), lane.clone());
            self.thread.handle.spawn(async move { me.run(job, lane).await });
        }
    }

    /// One delivery attempt, then its follow-up (acknowledged, retried or given up).
    async fn run(self: Arc<Self>, job: Job, lane: Arc<Lane>) {
        let event_id = job.event.id().as_str();
        let endpoint_id = job.endpoint.id.as_str();
        let decision = self.faults.current().engine.decide_delivery(&DeliveryFacts {
            event_id: &event_id,
            event_type: job.event.kind().as_str(),
            endpoint: &endpoint_id,
            attempt: job.attempt,
        });
        let label: Option<Arc<str>> = decision.label().map(Arc::from);
        if !decision.delay.is_zero() {
            tokio::time::sleep(decision.delay).await;
        }
        let fault = decision.fault.map(|(f, _)| f);
        let mut retry_allowed = true;
        let time_ms = now_ms();
        let sent = match &fault {
            Some(DeliveryFault::Drop) => Sent {
                result: Outcome::Dropped,
                status: None,
                error: Some("not sent: the connection never reached the receiver (drop fault)".into()),
                latency: None,
            },
            Some(DeliveryFault::Duplicate { copies, gap }) => {
                for copy in 2..=*copies {
                    self.spawn_copy(&job, copy, *gap * (copy - 1), label.clone());
                }
                self.send(&job, None).await
            }
            Some(DeliveryFault::LoseAck) => {
                let mut sent = self.send(&job, None).await;
                if sent.result == Outcome::Delivered {
                    sent.result = Outcome::AckLost;
                    sent.error = Some("the receiver's answer was lost (lose_ack fault)".into());
                }
                sent
            }
            Some(DeliveryFault::BadSignature { how, retry }) => {
                retry_allowed = *retry;
                self.send(&job, Some(*how)).await
            }
            Some(DeliveryFault::Delay { .. }) | None => self.send(&job, None).await,
        };
        let delivered = sent.result == Outcome::Delivered;
        let next_wait = match (delivered, retry_allowed) {
            (false, true) => self.settings.retries.get(job.attempt as usize - 1).copied(),
            _ => None,
        };
        self.metrics.observe(sent.result.as_str(), sent.latency);
        self.log.push(DeliveryRecord {
            seq: 0,
            time_ms,
            event: job.event.id(),
            event_type: job.event.kind().as_str(),
            endpoint: job.endpoint.id,
            url: Arc::from(&*job.endpoint.url),
            attempt: job.attempt,
            copy: None,
            resend: job.resend,
            result: sent.result,
            status: sent.status,
            error: sent.error,
            latency_ms: sent.latency.map(|l| l.as_secs_f64() * 1000.0),
            fault: label,
            retry_in_ms: next_wait.map(|w| w.as_millis() as u64),
            gave_up: !delivered && next_wait.is_none(),
        });
        lane.0.lock().active -= 1;
        if delivered {
            job.event.acknowledged();
            self.record_end(&job, true);
            self.delivered.fetch_add(1, Ordering::SeqCst);
        } else if next_wait.is_none() {
            job.event.mark_failed();
            self.record_end(&job, false);
            self.failed.fetch_add(1, Ordering::SeqCst);
        } else {
            self.retrying.fetch_add(1, Ordering::SeqCst);
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if next_wait.is_none() {
            self.outstanding.fetch_sub(1, Ordering::SeqCst);
        }
        self.changed.notify_waiters();
        self.pump(&lane);
        if let Some(wait) = next_wait {
            tokio::time::sleep(wait).await;
            self.enqueue(Job {
                attempt: job.attempt + 1,
                ..job
            });
            self.retrying.fetch_sub(1, Ordering::SeqCst);
            self.changed.notify_waiters();
        }
    }

    /// An extra copy of a delivery (`duplicate` fault), sent `after` the first; it counts
    /// as in flight until answered and never changes the event's state.
    fn spawn_copy(&self, job: &Job, copy: u32, after: Duration, label: Option<Arc<str>>) {
        let Some(me) = self.me.upgrade() else { return };
        let copy_job = Job {
            event: job.event.clone(),
            endpoint: job.endpoint.clone(),
            attempt: job.attempt,
            resend: job.resend,
        };
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.outstanding.fetch_add(1, Ordering::SeqCst);
        self.thread.handle.spawn(async move {
            if !after.is_zero() {
                tokio::time::sleep(after).await;
            }
            let time_ms = now_ms();
            let sent = me.send(&copy_job, None).await;
            me.metrics.observe(sent.result.as_str(), sent.latency);
            me.log.push(DeliveryRecord {
                seq: 0,
                time_ms,
                event: copy_job.event.id(),
                event_type: copy_job.event.kind().as_str(),
                endpoint: copy_job.endpoint.id,
                url: Arc::from(&*copy_job.endpoint.url),
                attempt: copy_job.attempt,
                copy: Some(copy),
                resend: copy_job.resend,
                result: sent.result,
                status: sent.status,
                error: sent.error,
                latency_ms: sent.latency.map(|l| l.as_secs_f64() * 1000.0),
                fault: label,
                retry_in_ms: None,
                gave_up: false,
            });
            me.in_flight.fetch_sub(1, Ordering::SeqCst);
            me.outstanding.fetch_sub(1, Ordering::SeqCst);
            me.changed.notify_waiters();
        });
    }

    /// POSTs the event, signed (or forged as `forgery` says).
    async fn send(&self, job: &Job, forgery: Option<Forgery>) -> Sent {
        let body = job.event.to_bytes();
        let now = now_unix();
        let header = match forgery {
            None => signature::header(&job.endpoint.secret, now, &body),
            Some(Forgery::WrongSecret) => signature::header(FORGED_SECRET, now, &body),
            Some(Forgery::StaleTimestamp) => signature::header(&job.endpoint.secret, now - STALE_BY_SECS, &body),
        };
        let started = Instant::now();
        let answer = self
            .client
            .post(&job.endpoint.url, header, body.into(), self.settings.timeout)
            .await;
        let latency = Some(started.elapsed());
        match answer {
            Ok(status) => Sent {
                result: if (200..300).contains(&status) {
                    Outcome::Delivered
                } else {
                    Outcome::Rejected
                },
                status: Some(status),
                error: None,
                latency,
            },
            Err(e) => Sent {
                result: match e {
                    SendError::Timeout(_) => Outcome::Timeout,
                    SendError::Failed(_) => Outcome::Error,
                },
                status: None,
                error: Some(e.to_string()),
                latency,
            },
        }
    }
}

impl Publisher for Webhooks {
    fn publish(&self, event: &Event, endpoints: &[Arc<WebhookEndpoint>]) {
        for endpoint in endpoints {
            self.outstanding.fetch_add(1, Ordering::SeqCst);
            self.enqueue(Job {
                event: event.clone(),
                endpoint: endpoint.clone(),
                attempt: 1,
                resend: false,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_schedules_parse() {
        assert_eq!(parse_retries("1s,10s,1m,5m").unwrap(), DEFAULT_RETRIES.to_vec());
        assert_eq!(parse_retries("none").unwrap(), Vec::<Duration>::new());
        assert_eq!(
            parse_retries(" 50ms , 2s").unwrap(),
            vec![Duration::from_millis(50), Duration::from_secs(2)]
        );
        assert!(parse_retries("1s,soon").unwrap_err().contains("'soon'"));
    }
}
