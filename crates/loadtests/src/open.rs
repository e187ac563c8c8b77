//! The open model at run time (`--rate`): a scheduler thread walks the [`Schedule`],
//! sleeping to each start with the OS's timer, and hands each start time to an idle
//! goose user through a channel, or counts it
//! **dropped** when every user is busy (k6's `dropped_iterations`: never queued, never
//! silently skipped). Users are pre-allocated: the first start waits until every user
//! is waiting for work.
//!
//! Each checkout's latency is also measured from its **intended** start (the schedule's
//! instant, not the moment a user picked it up), so a stalled generator or target shows
//! in the percentiles instead of hiding in a late start (coordinated omission). The
//! [`OpenReport`] carries that histogram, the counts and the achieved rate per second.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::arrival::{Arrivals, Schedule};
use crate::latency::{Latency, Percentiles};
use crate::progress::Counters;

/// The longest the scheduler sleeps without looking at goose's killswitch (Ctrl-C).
const WAKE: std::time::Duration = std::time::Duration::from_millis(250);
/// The shortest sleep: starts closer together than this go out together (at 30,000/s,
/// about six at a time), instead of a wake-up each.
const MIN_SLEEP: std::time::Duration = std::time::Duration::from_micros(200);

/// One checkout to start: its number in the schedule (1-based; a dropped start leaves a
/// gap in the order ids) and when it was meant to start.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    pub index: u64,
    pub intended: Instant,
}

/// What happened in one second of the schedule (by intended start; `completed` by the
/// moment the checkout ended).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Second {
    pub scheduled: u64,
    pub started: u64,
    pub dropped: u64,
    pub completed: u64,
}

/// Hands start times to users and counts what became of them.
pub struct Dispatcher {
    users: usize,
    idle: AtomicUsize,
    arrived: Notify,
    rx: flume::Receiver<Start>,
    t0: OnceLock<Instant>,
    seconds: Mutex<Vec<Second>>,
    intended_latency: Mutex<Latency>,
    counters: Arc<Counters>,
    /// When Ctrl-C ended the schedule, how far into it.
    stopped_after: OnceLock<std::time::Duration>,
}

impl Dispatcher {
    /// A dispatcher for `users` pre-allocated users, and the sender [`Dispatcher::run`] feeds.
    pub fn new(users: usize, counters: Arc<Counters>) -> (Arc<Self>, flume::Sender<Start>) {
        // Never more starts in the channel than users waiting for them.
        let (tx, rx) = flume::bounded(users.max(1));
        let d = Arc::new(Self {
            users: users.max(1),
            idle: AtomicUsize::new(0),
            arrived: Notify::new(),
            rx,
            t0: OnceLock::new(),
            seconds: Mutex::new(Vec::new()),
            intended_latency: Mutex::new(Latency::default()),
            counters,
            stopped_after: OnceLock::new(),
        });
        (d, tx)
    }

    /// A user waits for its next start; `None` once the schedule is over.
    pub async fn next(&self) -> Option<Start> {
        self.idle.fetch_add(1, Ordering::SeqCst);
        self.arrived.notify_one();
        self.rx.recv_async().await.ok()
    }

    /// A user finished the iteration `start` at `end`; `paid`: it was a checkout (its
    /// latency from the intended start counts), not a `--scenario` that only browses.
    pub fn finished(&self, start: &Start, end: Instant, paid: bool) {
        if paid {
            let us = end.saturating_duration_since(start.intended).as_micros() as u64;
            self.intended_latency
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(us);
        }
        let t0 = *self.t0.get().unwrap_or(&start.intended);
        let sec = end.saturating_duration_since(t0).as_secs() as usize;
        self.second(sec, |s| s.completed += 1);
    }

    fn second(&self, sec: usize, f: impl FnOnce(&mut Second)) {
        let mut seconds = self.seconds.lock().unwrap_or_else(|e| e.into_inner());
        if seconds.len() <= sec {
            seconds.resize(sec + 1, Second::default());
        }
        f(&mut seconds[sec]);
    }

    /// Walks the schedule once every user waits, then closes the channel (users end).
    pub async fn run(self: Arc<Self>, tx: flume::Sender<Start>, schedule: Schedule) {
        loop {
            if self.idle.load(Ordering::SeqCst) >= self.users {
                break;
            }
            self.arrived.notified().await;
        }
        // The pacing runs on a thread of its own. As a tokio task it slept on tokio's
        // timer, which ticks in whole milliseconds and fires only when a busy worker gets
        // to it: starts came out in late bursts of dozens, and a burst found every user
        // busy (dropped) while the generator still had CPU to spare.
        let _ = tokio::task::spawn_blocking(move || self.pace(&tx, &schedule)).await;
    }

    /// Hands out each start when its time comes (slept to with the OS's timer, at most
    /// [`MIN_SLEEP`] late when starts are closer than that), or counts it dropped.
    fn pace(&self, tx: &flume::Sender<Start>, schedule: &Schedule) {
        let t0 = Instant::now();
        let _ = self.t0.set(t0);
        let whole = schedule.duration.as_secs_f64().ceil() as usize;
        self.second(whole.saturating_sub(1), |_| {});
        for (k, offset) in schedule.offsets().enumerate() {
            let at = t0 + offset;
            loop {
                // Ctrl-C (goose's killswitch) ends the schedule; users finish their checkouts.
                if goose::is_killswitch_triggered() {
                    let _ = self.stopped_after.set(t0.elapsed());
                    return;
                }
                let now = Instant::now();
                if at <= now {
                    break;
                }
                std::thread::sleep((at - now).clamp(MIN_SLEEP, WAKE));
            }
            let start = Start {
                index: k as u64 + 1,
                intended: at,
            };
            let claimed = self
                .idle
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            let started = claimed && tx.try_send(start).is_ok();
            if !started {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
            self.second(offset.as_secs() as usize, |s| {
                s.scheduled += 1;
                if started {
                    s.started += 1;
                } else {
                    s.dropped += 1;
                }
            });
        }
    }

    /// When the schedule began (after every user was launched and waiting), if it did.
    pub fn schedule_started(&self) -> Option<Instant> {
        self.t0.get().copied()
    }

    /// The run's open-model section of the report.
    pub fn report(&self, mut about: OpenRun) -> OpenReport {
        if let Some(stopped) = self.stopped_after.get() {
            about.run_time_secs = about.run_time_secs.min(stopped.as_secs_f64());
        }
        let seconds = self.seconds.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let latency = self.intended_latency.lock().unwrap_or_else(|e| e.into_inner()).clone();
        OpenReport::new(about, seconds, &latency)
    }
}

/// How the open model was asked for.
pub struct OpenRun {
    /// `--rate` as asked (all generators together).
    pub rate: String,
    pub generators: u32,
    pub arrivals: Arrivals,
    pub users: u64,
    pub run_time_secs: f64,
}

/// The open model's part of `report.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenReport {
    /// `--rate` as asked, for all `generators` together.
    pub rate: String,
    pub generators: u32,
    pub arrivals: Arrivals,
    /// Users (most checkouts in flight), summed over merged runs.
    pub users: u64,
    /// The schedule's length in seconds (up to Ctrl-C, when that stopped it).
    pub run_time_secs: f64,
    pub scheduled: u64,
    pub started: u64,
    pub dropped: u64,
    /// Checkouts started per second of run time.
    pub achieved_per_sec: f64,
    /// By second of the schedule: where the target fell behind.
    pub per_second: Vec<Second>,
    /// End to end from each checkout's intended start (coordinated-omission-free).
    pub latency_from_intended: Percentiles,
    /// HdrHistogram V2-deflate, base64, in microseconds.
    pub latency_from_intended_histogram: String,
}

impl OpenReport {
    fn new(about: OpenRun, per_second: Vec<Second>, latency: &Latency) -> Self {
        let sum = |f: fn(&Second) -> u64| per_second.iter().map(f).sum::<u64>();
        let mut r = OpenReport {
            rate: about.rate,
            generators: about.generators,
            arrivals: about.arrivals,
            users: about.users,
            run_time_secs: about.run_time_secs,
            scheduled: sum(|s| s.scheduled),
            started: sum(|s| s.started),
            dropped: sum(|s| s.dropped),
            achieved_per_sec: 0.0,
            per_second,
            latency_from_intended: latency.percentiles(),
            latency_from_intended_histogram: latency.to_base64(),
        };
        r.achieved_per_sec = r.achieved();
        r
    }

    fn achieved(&self) -> f64 {
        if self.run_time_secs > 0.0 {
            self.started as f64 / self.run_time_secs
        } else {
            0.0
        }
    }

    /// Adds another generator's run (concurrent with this one: seconds line up).
    pub fn merge(&mut self, other: &OpenReport) -> Result<(), String> {
        let mut mine = Latency::from_base64(&self.latency_from_intended_histogram)?;
        mine.merge(&Latency::from_base64(&other.latency_from_intended_histogram)?);
        self.users += other.users;
        self.run_time_secs = self.run_time_secs.max(other.run_time_secs);
        self.scheduled += other.scheduled;
        self.started += other.started;
        self.dropped += other.dropped;
        if self.per_second.len() < other.per_second.len() {
            self.per_second.resize(other.per_second.len(), Second::default());
        }
        for (a, b) in self.per_second.iter_mut().zip(&other.per_second) {
            a.scheduled += b.scheduled;
            a.started += b.started;
            a.dropped += b.dropped;
            a.completed += b.completed;
        }
        self.achieved_per_sec = self.achieved();
        self.latency_from_intended = mine.percentiles();
        self.latency_from_intended_histogram = mine.to_base64();
        Ok(())
    }

    /// The summary's lines about the open model.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "  open model  {} {} over {:.0} s with {} users{}: {} scheduled, {} started, {} dropped; achieved {:.1}/s\n",
            self.rate,
            self.arrivals,
            self.run_time_secs,
            self.users,
            if self.generators > 1 {
                format!(" ({} generators)", self.generators)
            } else {
                String::new()
            },
            self.scheduled,
            self.started,
            self.dropped,
            self.achieved_per_sec
        );
        if let Some((sec, w)) = self.worst_second() {
            s.push_str(&format!(
                "              fell behind: second {sec} started {} of {} ({} dropped); see per_second in report.json\n",
                w.started, w.scheduled, w.dropped
            ));
        }
        s.push_str("              latency \"intended\" counts from each checkout's scheduled start (coordinated-omission-free)\n");
        s
    }

    /// `report.md`'s open-model table.
    pub fn markdown(&self) -> String {
        format!(
            "\n| open model | users | scheduled | started | dropped | achieved/s |\n|---|---|---|---|---|---|\n| {} {} over {:.0} s | {} | {} | {} | {} | {:.1} |\n\nLatency \"from its intended start\" counts from each checkout's scheduled start, so a stall shows (coordinated-omission-free).\n",
            self.rate,
            self.arrivals,
            self.run_time_secs,
            self.users,
            self.scheduled,
            self.started,
            self.dropped,
            self.achieved_per_sec
        )
    }

    /// The slowest full second of the schedule by starts, if any fell short of its schedule.
    pub fn worst_second(&self) -> Option<(usize, &Second)> {
        self.per_second
            .iter()
            .enumerate()
            .filter(|(_, s)| s.dropped > 0)
            .max_by_key(|(_, s)| s.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::arrival::parse_rate;

    fn schedule(rate: &str, ms: u64) -> Schedule {
        Schedule {
            rate: parse_rate(rate).unwrap(),
            duration: Duration::from_millis(ms),
            arrivals: Arrivals::Uniform,
            seed: 1,
        }
    }

    fn about() -> OpenRun {
        OpenRun {
            rate: "1000/s".into(),
            generators: 1,
            arrivals: Arrivals::Uniform,
            users: 2,
            run_time_secs: 0.05,
        }
    }

    /// `n` users that each hold their first start until the schedule is over.
    async fn stuck_users(rate: &str, ms: u64, n: usize) -> (OpenReport, Vec<u64>, Arc<Counters>) {
        let counters = Arc::new(Counters::default());
        let (d, tx) = Dispatcher::new(n, counters.clone());
        let (release_tx, release_rx) = flume::unbounded::<()>();
        let users: Vec<_> = (0..n)
            .map(|_| {
                let (d, release_rx) = (d.clone(), release_rx.clone());
                tokio::spawn(async move {
                    let mut done = Vec::new();
                    while let Some(start) = d.next().await {
                        let _ = release_rx.recv_async().await;
                        d.finished(&start, Instant::now(), true);
                        done.push(start.index);
                    }
                    done
                })
            })
            .collect();
        d.clone().run(tx, schedule(rate, ms)).await;
        for _ in 0..n {
            release_tx.send(()).unwrap();
        }
        let mut done = Vec::new();
        for u in users {
            done.extend(u.await.unwrap());
        }
        done.sort_unstable();
        (d.report(about()), done, counters)
    }

    #[tokio::test]
    async fn starts_while_every_user_is_busy_are_dropped_and_counted() {
        let (r, done, counters) = stuck_users("1000/s", 50, 3).await;
        assert_eq!(done, [1, 2, 3], "the first three starts, one per user");
        assert_eq!((r.scheduled, r.started, r.dropped), (50, 3, 47));
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 47);
        assert_eq!(
            r.per_second,
            vec![Second {
                scheduled: 50,
                started: 3,
                dropped: 47,
                completed: 3
            }]
        );
        assert!((r.achieved_per_sec - 60.0).abs() < 1e-9, "3 in 0.05 s");
        // Each stuck checkout waited at least until the last start time (49 ms): counted
        // from its intended start, that wait shows.
        assert_eq!(r.latency_from_intended.count, 3);
        assert!(r.latency_from_intended.p50_ms >= 47.0, "{:?}", r.latency_from_intended);
        assert_eq!(r.worst_second().unwrap().0, 0);
    }

    #[tokio::test]
    async fn seconds_split_by_intended_start_and_merge_by_second() {
        let (r, _, _) = stuck_users("100/s", 1500, 1).await;
        assert_eq!((r.scheduled, r.started, r.dropped), (150, 1, 149));
        assert_eq!((r.per_second[0].scheduled, r.per_second[0].dropped), (100, 99));
        assert_eq!((r.per_second[1].scheduled, r.per_second[1].dropped), (50, 50));
        let mut merged = r.clone();
        merged.merge(&r).unwrap();
        assert_eq!((merged.scheduled, merged.dropped, merged.users), (300, 298, 4));
        assert_eq!(merged.per_second[1].dropped, 100);
        assert_eq!(merged.latency_from_intended.count, 2);
        assert_eq!(merged.achieved_per_sec, r.achieved_per_sec * 2.0);
    }
}
