//! The open model at run time (`--rate`): the [`Dispatcher`] hands the [`Schedule`]'s
//! start times to goose users. A user that becomes idle **claims** the next start not
//! yet taken, so every idle user holds one start ahead of its time, and
//! [`Dispatcher::pace`] rings the user's bell when that time comes (an [`Alarm`] set to
//! the first waiting start: a timerfd on Linux). A start whose time comes while **every
//! user is busy** is left unclaimed and counted **dropped** (k6's `dropped_iterations`:
//! never queued, never silently skipped) by the next user to become idle, or by the pacer
//! within twice [`WAKE`]. Users are pre-allocated: the schedule begins when every user is
//! waiting for work.
//!
//! Each checkout's latency is also measured from its **intended** start (the schedule's
//! instant, not the moment a user picked it up), so a stalled generator or target shows
//! in the percentiles instead of hiding in a late start (coordinated omission). How late
//! the generator itself started each checkout is measured apart (`start_late`). The
//! [`OpenReport`] carries those histograms, the counts and the achieved rate.
//!
//! The pacing runs on the users' own runtime: a start costs no thread switch
//! (bench/notes.md, "The open model without a pacing thread").

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::alarm::Alarm;
use crate::arrival::{Arrivals, Schedule};
use crate::latency::{Latency, Percentiles};
use crate::progress::Counters;

/// How often the pacer looks at goose's killswitch (Ctrl-C or SIGTERM), and how long an
/// unclaimed start may be due before the pacer counts it dropped.
pub const WAKE: Duration = Duration::from_millis(250);

/// The clock: tokio's, so tests can pause it (unpaused, it is the OS's monotonic clock).
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

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

/// The schedule's starts that no user has claimed and none has dropped, in order, each
/// with its 0-based place in the schedule and its offset from the schedule's start.
type Offsets = std::iter::Enumerate<Box<dyn Iterator<Item = Duration> + Send>>;

struct Cursor(std::iter::Peekable<Offsets>);

impl Cursor {
    fn new(schedule: &Schedule) -> Self {
        let offsets: Box<dyn Iterator<Item = Duration> + Send> = Box::new(schedule.offsets());
        Self(offsets.enumerate().peekable())
    }

    /// Passes over every start due before `due` (`dropped` is told each one's offset).
    fn drop_before(&mut self, due: Duration, mut dropped: impl FnMut(Duration)) {
        while let Some((_, offset)) = self.0.next_if(|&(_, o)| o < due) {
            dropped(offset);
        }
    }

    /// For a user idle since `idle_since` (from the schedule's start): the starts due
    /// before it came while every user was busy (dropped), the next one is its own (its
    /// 1-based index, and its offset).
    fn claim(&mut self, idle_since: Duration, dropped: impl FnMut(Duration)) -> Option<(u64, Duration)> {
        self.drop_before(idle_since, dropped);
        self.0.next().map(|(k, offset)| (k as u64 + 1, offset))
    }

    /// Whether every start has been claimed or dropped.
    fn is_over(&mut self) -> bool {
        self.0.peek().is_none()
    }
}

/// The cursor and the claimed starts not yet due, under one lock (so that claims and
/// their wake-ups keep the schedule's order).
struct Book {
    cursor: Cursor,
    /// Claimed starts not yet due, in the order of their times (claims follow the
    /// schedule), each with the bell of the user that holds it.
    waiting: VecDeque<(Instant, Arc<Notify>)>,
    /// A signal (Ctrl-C, SIGTERM) ended the schedule: the pacer has rung every bell and
    /// rings no more, so no start may be claimed after it.
    stopped: bool,
}

/// Hands start times to users and counts what became of them.
pub struct Dispatcher {
    users: usize,
    /// Users that have asked for their first start.
    arrived: AtomicUsize,
    everyone: Notify,
    book: Mutex<Book>,
    /// Set to the first waiting start's time; [`Dispatcher::pace`] rings its bell.
    alarm: Alarm,
    /// The schedule's length in whole seconds (the per-second table's size).
    whole_secs: usize,
    t0: OnceLock<Instant>,
    seconds: Mutex<Vec<Second>>,
    intended_latency: Mutex<Latency>,
    start_late: Mutex<Latency>,
    counters: Arc<Counters>,
    /// When a signal ended the schedule, how far into it.
    stopped_after: OnceLock<Duration>,
}

/// One user's place at the dispatcher: its bell, and when it last became idle.
pub struct Seat {
    dispatcher: Arc<Dispatcher>,
    bell: Arc<Notify>,
    idle_since: Option<Instant>,
}

impl Seat {
    /// The user's next start, once its time comes; `None` once the schedule is over or
    /// a signal stopped it.
    pub async fn next(&mut self) -> Option<Start> {
        self.dispatcher.next(&self.bell, self.idle_since).await
    }

    /// The user finished the iteration `start` at `end` (and is idle from then); `paid`:
    /// it was a checkout (its latency from the intended start counts), not a
    /// `--scenario` iteration that only browses.
    pub fn finished(&mut self, start: &Start, end: Instant, paid: bool) {
        self.dispatcher.finished(start, end, paid);
        self.idle_since = Some(end);
    }
}

impl Dispatcher {
    /// A dispatcher of `schedule` for `users` pre-allocated users, waking them with
    /// `alarm` ([`Alarm::new`]; spawn [`Dispatcher::pace`] beside the users).
    pub fn new(users: usize, counters: Arc<Counters>, schedule: &Schedule, alarm: Alarm) -> Arc<Self> {
        Arc::new(Self {
            users: users.max(1),
            arrived: AtomicUsize::new(0),
            everyone: Notify::new(),
            book: Mutex::new(Book {
                cursor: Cursor::new(schedule),
                waiting: VecDeque::new(),
                stopped: false,
            }),
            alarm,
            whole_secs: schedule.duration.as_secs_f64().ceil() as usize,
            t0: OnceLock::new(),
            seconds: Mutex::new(Vec::new()),
            intended_latency: Mutex::new(Latency::default()),
            start_late: Mutex::new(Latency::default()),
            counters,
            stopped_after: OnceLock::new(),
        })
    }

    /// A user's seat.
    pub fn seat(self: &Arc<Self>) -> Seat {
        Seat {
            dispatcher: self.clone(),
            bell: Arc::new(Notify::new()),
            idle_since: None,
        }
    }

    /// The schedule's start, once every user waits for its first start (a user's first
    /// call counts it in).
    async fn everyone_waiting(&self) -> Instant {
        if self.t0.get().is_none() && self.arrived.fetch_add(1, Ordering::SeqCst) + 1 >= self.users {
            self.t0.get_or_init(|| {
                self.second(self.whole_secs.saturating_sub(1), |_| {});
                now()
            });
            self.everyone.notify_waiters();
        }
        self.began().await
    }

    /// A user idle since `idle_since` (`None`: since the schedule began) claims the next
    /// start and, when it is not yet due, waits for [`Dispatcher::pace`] to ring its bell.
    async fn next(&self, bell: &Arc<Notify>, idle_since: Option<Instant>) -> Option<Start> {
        let t0 = self.everyone_waiting().await;
        let since = idle_since.map_or(Duration::ZERO, |t| t.saturating_duration_since(t0));
        let (index, offset, wait) = {
            let mut book = self.book.lock().unwrap_or_else(|e| e.into_inner());
            if book.stopped || self.stopped_by_signal(t0) {
                return None;
            }
            let (index, offset) = book.cursor.claim(since, |o| self.dropped(o))?;
            let intended = t0 + offset;
            let wait = intended > now();
            if wait {
                book.waiting.push_back((intended, bell.clone()));
                if book.waiting.len() == 1 {
                    self.alarm.set(intended);
                }
            }
            (index, offset, wait)
        };
        if wait {
            bell.notified().await;
        }
        if self.stopped_by_signal(t0) {
            return None;
        }
        let intended = t0 + offset;
        let late = now().saturating_duration_since(intended).as_micros() as u64;
        self.start_late.lock().unwrap_or_else(|e| e.into_inner()).record(late);
        self.second(offset.as_secs() as usize, |s| {
            s.scheduled += 1;
            s.started += 1;
        });
        Some(Start { index, intended })
    }

    /// Whether a signal (goose's killswitch) ended the schedule (users finish their
    /// checkouts); if so, how far into it is noted, unless the pacer noted it first.
    fn stopped_by_signal(&self, t0: Instant) -> bool {
        let stopped = goose::is_killswitch_triggered();
        if stopped {
            let _ = self.stopped_after.set(now().saturating_duration_since(t0));
        }
        stopped
    }

    fn dropped(&self, offset: Duration) {
        self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        self.second(offset.as_secs() as usize, |s| {
            s.scheduled += 1;
            s.dropped += 1;
        });
    }

    /// Rings each waiting user's bell when its start is due (the alarm is set to the
    /// first one's time), and every [`WAKE`] counts dropped the starts due longer ago
    /// than that which no user claimed (so the progress line shows drops while every
    /// user is stuck) and looks at the killswitch (Ctrl-C, SIGTERM), until the schedule
    /// is over. Spawn it beside the users: it runs on their runtime, so a start costs no
    /// thread of its own.
    pub async fn pace(self: Arc<Self>) {
        let t0 = self.began().await;
        let mut sweep = tokio::time::interval(WAKE);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.alarm.rung() => {}
                _ = sweep.tick() => {}
            }
            let stopped = goose::is_killswitch_triggered();
            let now = now();
            let mut book = self.book.lock().unwrap_or_else(|e| e.into_inner());
            while let Some((at, bell)) = book.waiting.front() {
                if !stopped && *at > now {
                    self.alarm.set(*at);
                    break;
                }
                bell.notify_one();
                book.waiting.pop_front();
            }
            if stopped {
                // The starts due before the signal that nobody claimed were dropped; the run
                // ends now, whether or not a user is still in a checkout.
                book.cursor
                    .drop_before(now.saturating_duration_since(t0), |o| self.dropped(o));
                book.stopped = true;
                let _ = self.stopped_after.set(now.saturating_duration_since(t0));
                return;
            }
            let due = now.saturating_duration_since(t0).saturating_sub(WAKE);
            book.cursor.drop_before(due, |o| self.dropped(o));
            if book.cursor.is_over() && book.waiting.is_empty() {
                return;
            }
        }
    }

    /// The schedule's start, waited for.
    async fn began(&self) -> Instant {
        loop {
            let notified = self.everyone.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(t0) = self.t0.get() {
                return *t0;
            }
            notified.await;
        }
    }

    /// A user finished the iteration `start` at `end`; `paid`: it was a checkout (its
    /// latency from the intended start counts), not a `--scenario` that only browses.
    fn finished(&self, start: &Start, end: Instant, paid: bool) {
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
        let late = self.start_late.lock().unwrap_or_else(|e| e.into_inner()).clone();
        OpenReport::new(about, seconds, &latency, &late)
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
    /// The schedule's length in seconds (up to the signal, when one stopped it).
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
    /// How late the generator started each checkout after its intended start (its own
    /// timer and CPU: part of `latency_from_intended`, none of the target's).
    #[serde(default)]
    pub start_late: Percentiles,
    /// HdrHistogram V2-deflate, base64, in microseconds (empty in reports from before it).
    #[serde(default)]
    pub start_late_histogram: String,
}

impl OpenReport {
    fn new(about: OpenRun, per_second: Vec<Second>, latency: &Latency, late: &Latency) -> Self {
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
            start_late: late.percentiles(),
            start_late_histogram: late.to_base64(),
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
        // A report from before start lateness was measured has none to add.
        let late_of = |s: &str| match s {
            "" => Ok(Latency::default()),
            s => Latency::from_base64(s),
        };
        let mut late = late_of(&self.start_late_histogram)?;
        late.merge(&late_of(&other.start_late_histogram)?);
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
        self.start_late = late.percentiles();
        self.start_late_histogram = late.to_base64();
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
        if self.start_late.count > 0 {
            s.push_str(&format!(
                "              the generator started checkouts late by p50 {:.2} ms, p99 {:.2} ms (its own timer and CPU, counted in \"intended\")\n",
                self.start_late.p50_ms, self.start_late.p99_ms
            ));
        }
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_user_claims_the_first_start_from_when_it_became_idle_and_what_came_before_is_dropped() {
        // 1000/s for 10 ms: starts at 0, 1, ..., 9 ms.
        let mut c = Cursor::new(&schedule("1000/s", 10));
        let mut dropped = Vec::new();
        let mut claim = |idle_since: Duration| c.claim(idle_since, |o| dropped.push(o));
        // Two users idle from the start hold the first two starts ahead of their time.
        assert_eq!(claim(ms(0)), Some((1, ms(0))));
        assert_eq!(claim(ms(0)), Some((2, ms(1))));
        // One idle from 4.5 ms: starts 3 to 5 (2, 3 and 4 ms) came while both were busy.
        assert_eq!(claim(Duration::from_micros(4500)), Some((6, ms(5))));
        // One idle from exactly 6 ms takes the start at 6 ms.
        assert_eq!(claim(ms(6)), Some((7, ms(6))));
        assert_eq!(claim(ms(20)), None, "the schedule is over");
        assert_eq!(claim(ms(20)), None);
        assert_eq!(dropped, [ms(2), ms(3), ms(4), ms(7), ms(8), ms(9)]);
    }

    #[test]
    fn only_starts_due_before_the_sweep_point_are_dropped() {
        let mut c = Cursor::new(&schedule("1000/s", 10));
        let mut dropped = 0;
        c.drop_before(Duration::from_micros(2500), |_| dropped += 1);
        assert_eq!(dropped, 3);
        c.drop_before(ms(3), |_| dropped += 1);
        assert_eq!(dropped, 3, "a start due exactly now can still be claimed");
        assert_eq!(c.claim(ms(3), |_| dropped += 1), Some((4, ms(3))));
        assert!(!c.is_over());
    }

    /// `n` users that each hold their first start until the schedule is over (on tokio's
    /// paused clock: no real waiting), with the pacer running beside them.
    async fn stuck_users(rate: &str, ms: u64, n: usize) -> (OpenReport, Vec<u64>, Arc<Counters>) {
        let counters = Arc::new(Counters::default());
        let d = Dispatcher::new(n, counters.clone(), &schedule(rate, ms), Alarm::timer());
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let users: Vec<_> = (0..n)
            .map(|_| {
                let (mut seat, gate) = (d.seat(), gate.clone());
                tokio::spawn(async move {
                    let mut done = Vec::new();
                    while let Some(start) = seat.next().await {
                        gate.acquire().await.unwrap().forget();
                        seat.finished(&start, now(), true);
                        done.push(start.index);
                    }
                    done
                })
            })
            .collect();
        let pacer = tokio::spawn(d.clone().pace());
        let t0 = d.began().await;
        // The schedule is over, and the pacer has had time to count what nobody took.
        tokio::time::sleep_until((t0 + Duration::from_millis(ms) + 2 * WAKE).into()).await;
        let swept = counters.dropped.load(Ordering::Relaxed);
        assert!(pacer.is_finished(), "the pacer ends with the schedule");
        gate.add_permits(n);
        let mut done = Vec::new();
        for u in users {
            done.extend(u.await.unwrap());
        }
        done.sort_unstable();
        assert_eq!(
            swept,
            counters.dropped.load(Ordering::Relaxed),
            "the pacer had counted every drop"
        );
        (d.report(about()), done, counters)
    }

    /// Users whose checkouts take no time, each on its own task, woken by `alarm` in real
    /// time: every start is taken, and none before its time. (A user per start: with
    /// fewer, a late wake-up on a busy test machine could find every user holding a
    /// start, and drop the next one.)
    async fn quick_users(alarm: Alarm) -> OpenReport {
        let counters = Arc::new(Counters::default());
        let d = Dispatcher::new(50, counters, &schedule("2000/s", 25), alarm);
        let users: Vec<_> = (0..50)
            .map(|_| {
                let mut seat = d.seat();
                tokio::spawn(async move {
                    let mut done = Vec::new();
                    while let Some(start) = seat.next().await {
                        let at = now();
                        assert!(at >= start.intended, "started before its time");
                        seat.finished(&start, at, true);
                        done.push(start.index);
                    }
                    done
                })
            })
            .collect();
        let pacer = tokio::spawn(d.clone().pace());
        let mut done = Vec::new();
        for u in users {
            done.extend(u.await.unwrap());
        }
        pacer.await.unwrap();
        done.sort_unstable();
        assert_eq!(done, (1..=50).collect::<Vec<_>>());
        d.report(about())
    }

    #[tokio::test]
    async fn the_alarm_wakes_each_user_at_its_start() {
        for alarm in [Alarm::new(), Alarm::timer()] {
            let r = quick_users(alarm).await;
            assert_eq!((r.scheduled, r.started, r.dropped), (50, 50, 0));
            assert_eq!(r.start_late.count, 50);
        }
    }

    #[tokio::test(start_paused = true)]
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
        // Each stuck checkout waited at least until the schedule was over: counted from
        // its intended start, that wait shows.
        assert_eq!(r.latency_from_intended.count, 3);
        assert!(r.latency_from_intended.p50_ms >= 47.0, "{:?}", r.latency_from_intended);
        assert_eq!(r.worst_second().unwrap().0, 0);
        // Each user slept to its start on tokio's timer, late by less than its tick.
        assert_eq!(r.start_late.count, 3);
        assert!(r.start_late.max_ms < 1.0, "{:?}", r.start_late);
    }

    #[tokio::test(start_paused = true)]
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
        assert_eq!(merged.start_late.count, 2);
        assert_eq!(merged.achieved_per_sec, r.achieved_per_sec * 2.0);
        // A report written before start lateness was measured still merges.
        let mut old = r.clone();
        old.start_late_histogram.clear();
        old.start_late = Percentiles::default();
        merged.merge(&old).unwrap();
        assert_eq!(merged.start_late.count, 2);
    }
}
