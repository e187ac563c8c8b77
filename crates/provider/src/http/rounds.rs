//! Answers leave in rounds: a connection's first write of an answer waits until the
//! worker thread has run every request that was ready with it, and then all of that
//! round's connections write, one after another.
//!
//! Why: on a host where the client sleeps while it waits (a closed-loop load test whose
//! client is faster than the provider), each answer written alone wakes the client
//! through the scheduler of another core. On the 2-core VM of `bench/notes.md` that wake
//! was about a third of the kernel's time on a new payment, and `wrk` slept 0.57-0.63 times
//! an answer against the provider (0.017 against a hello-world fast enough to keep it busy).
//! Written back to back, a round's answers wake it once: the later writes find it
//! awake.
//!
//! How: the first connection to write on a worker opens a [`Round`] and spawns its
//! releaser, a task that yields once (tokio runs a yielded task only after the worker
//! has polled its I/O driver or is about to sleep: after every task that was ready) and
//! then releases the round, waking its connections. A round releases itself sooner when
//! it holds [`MAX_ROUND`] connections, so an answer waits behind at most `MAX_ROUND - 1`
//! other requests. At low load a round is one connection, and its answer waits for one
//! task's poll.
//!
//! Only the start of an answer waits: a connection keeps its turn until its writes are
//! flushed, so an answer's head and body, or a partial write's rest, are never split by a
//! round. Nothing here copies a byte; hyper keeps the answer until its turn comes.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

/// The most connections a round holds; the one that fills it releases it at once.
/// Against `wrk` (64 connections) a cap of 32 gave the most answers a second, but a
/// round that takes in every client of a smaller closed loop (`fauxpay load`'s 32 users)
/// turns it into lock-step: the provider runs the round while the client waits, then the
/// client runs while the provider waits. 16 keeps two rounds in flight there (measured
/// with bare goose, alternated: 16 ahead of 32 in two rounds of three; `bench/notes.md`).
pub const MAX_ROUND: usize = 16;

/// Connections waiting to write, released together.
#[derive(Default)]
pub struct Round {
    released: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Round {
    fn released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }

    /// Releases the round: every connection waiting in it may write. Idempotent.
    fn release(&self) {
        if self.released.swap(true, Ordering::AcqRel) {
            return;
        }
        let wakers = std::mem::take(&mut *self.wakers.lock());
        for w in wakers {
            w.wake();
        }
    }

    /// Adds a waiting connection; `None` once the round is released or full (the caller
    /// then writes at once, after releasing a full round).
    fn join(&self, waker: &Waker) -> Option<usize> {
        let mut wakers = self.wakers.lock();
        if self.released() {
            return None;
        }
        if wakers.len() + 1 >= MAX_ROUND {
            drop(wakers);
            self.release();
            return None;
        }
        wakers.push(waker.clone());
        Some(wakers.len() - 1)
    }

    /// Keeps a waiting connection's waker current (its task may have moved).
    fn rewake(&self, at: usize, waker: &Waker) {
        let mut wakers = self.wakers.lock();
        if let Some(w) = wakers.get_mut(at) {
            if !w.will_wake(waker) {
                *w = waker.clone();
            }
        }
    }
}

thread_local! {
    /// The round this worker thread is filling.
    static CURRENT: RefCell<Option<Arc<Round>>> = const { RefCell::new(None) };
}

/// The round to join on this thread: the one being filled, or a new one with its
/// releaser spawned.
fn current_round() -> Arc<Round> {
    CURRENT.with(|current| {
        let mut current = current.borrow_mut();
        if let Some(round) = current.as_ref().filter(|r| !r.released()) {
            return round.clone();
        }
        let round = Arc::new(Round::default());
        let releaser = round.clone();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            releaser.release();
        });
        *current = Some(round.clone());
        round
    })
}

/// Where one connection stands: between answers, waiting in a round, or free to write
/// until its writes are flushed.
#[derive(Default)]
pub enum Turn {
    #[default]
    Idle,
    Waiting(Arc<Round>, usize),
    Writing,
}

impl Turn {
    /// Ready when the connection may write now; otherwise it waits in this thread's round
    /// and is woken when the round is released.
    pub fn poll_write_turn(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            Turn::Writing => Poll::Ready(()),
            Turn::Waiting(round, at) => {
                if round.released() {
                    *self = Turn::Writing;
                    return Poll::Ready(());
                }
                round.rewake(*at, cx.waker());
                // Released between the check and the waker's update: no wake will come.
                if round.released() {
                    *self = Turn::Writing;
                    return Poll::Ready(());
                }
                Poll::Pending
            }
            Turn::Idle => {
                let round = current_round();
                match round.join(cx.waker()) {
                    Some(at) => {
                        *self = Turn::Waiting(round, at);
                        Poll::Pending
                    }
                    None => {
                        *self = Turn::Writing;
                        Poll::Ready(())
                    }
                }
            }
        }
    }

    /// The connection's writes are flushed: its next answer waits for a round again.
    pub fn flushed(&mut self) {
        if matches!(self, Turn::Writing) {
            *self = Turn::Idle;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;

    /// Counts its wakes.
    struct Count(std::sync::atomic::AtomicUsize);
    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_round_wakes_each_waiting_connection_once_on_release_and_a_full_one_releases_itself() {
        let round = Round::default();
        let counts: Vec<Arc<Count>> = (0..MAX_ROUND).map(|_| Arc::new(Count(0.into()))).collect();
        let wakers: Vec<Waker> = counts.iter().map(|c| Waker::from(c.clone())).collect();
        for (i, w) in wakers.iter().enumerate().take(MAX_ROUND - 1) {
            assert_eq!(round.join(w), Some(i));
        }
        assert!(!round.released());
        assert!(counts.iter().all(|c| c.0.load(Ordering::SeqCst) == 0));
        // The last place releases the round and writes at once.
        assert_eq!(round.join(&wakers[MAX_ROUND - 1]), None);
        assert!(round.released());
        let woken: Vec<usize> = counts.iter().map(|c| c.0.load(Ordering::SeqCst)).collect();
        assert_eq!(woken[..MAX_ROUND - 1], vec![1; MAX_ROUND - 1]);
        assert_eq!(woken[MAX_ROUND - 1], 0, "the filler is not woken: it writes now");
        round.release();
        assert!(counts.iter().all(|c| c.0.load(Ordering::SeqCst) <= 1), "released once");
        assert_eq!(round.join(&wakers[0]), None, "a released round takes no one");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn connections_ready_together_write_after_every_one_of_them_asked() {
        // Three connections ask for a turn in one poll each: none may write until all
        // three have asked and the worker has run out of ready work.
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for n in 0..3 {
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let mut turn = Turn::default();
                order.lock().push(format!("ask {n}"));
                poll_fn(|cx| turn.poll_write_turn(cx)).await;
                order.lock().push(format!("write {n}"));
                turn.flushed();
                assert!(matches!(turn, Turn::Idle));
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let order = order.lock().clone();
        assert_eq!(&order[..3], ["ask 0", "ask 1", "ask 2"], "{order:?}");
        let mut writes = order[3..].to_vec();
        writes.sort();
        assert_eq!(writes, ["write 0", "write 1", "write 2"], "{order:?}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_connection_keeps_its_turn_until_flushed() {
        let mut turn = Turn::default();
        poll_fn(|cx| turn.poll_write_turn(cx)).await;
        // A second write of the same answer (its body, a partial write's rest) goes at once.
        let again = poll_fn(|cx| Poll::Ready(turn.poll_write_turn(cx))).await;
        assert!(again.is_ready());
        turn.flushed();
        // The next answer waits for a round again.
        let next = poll_fn(|cx| Poll::Ready(turn.poll_write_turn(cx))).await;
        assert!(next.is_pending());
        poll_fn(|cx| turn.poll_write_turn(cx)).await;
    }
}
