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
//! releaser, a task that yields once and then releases the round, waking its
//! connections, which the worker then polls one after another. tokio runs a yielded task
//! again when the worker next polls its I/O driver: when it has run out of ready tasks,
//! or at its periodic check (every 61 task polls), whichever comes first. So a round
//! collects the requests the worker runs until then, and no more than [`MAX_ROUND`]
//! connections: the one that fills it releases it at once. At low load a round is one
//! connection, and its answer waits for one driver poll with nothing to wait for.
//!
//! A connection keeps its turn until its writes are flushed, so an answer written whole
//! (its head and body, or a partial write's rest) is never split by a round; a streamed
//! answer (a `slow_body` dribble, the ledger's export) flushes between pieces, and each
//! piece after a flush waits for a round of its own. Nothing here copies a byte; hyper
//! keeps the answer until its turn comes.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

/// The most connections a round holds; the one that fills it releases it at once.
/// Against `wrk` (64 connections) a cap of 32 gave the most answers a second, but a
/// round that takes in every client of a smaller closed loop (`fauxpay load`'s 32 users)
/// can turn it into lock-step: the provider runs the round while the client waits, then
/// the client runs while the provider waits. 16 leaves room for two rounds in flight
/// there; measured with bare goose, alternated, 16 was ahead of 32 in each of three
/// rounds, by 2-16% (`bench/notes.md`).
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

/// Releases its round when dropped.
struct ReleaseOnDrop(Arc<Round>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.release();
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
        // Released when the releaser ends, or is dropped unrun (its runtime shut down):
        // a round never outlives its releaser unreleased.
        let releaser = ReleaseOnDrop(round.clone());
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            drop(releaser);
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

    /// Polls `turn` once; the round it waits in, if it waits.
    async fn ask(turn: &mut Turn) -> Option<usize> {
        let asked = poll_fn(|cx| Poll::Ready(turn.poll_write_turn(cx))).await;
        match turn {
            Turn::Waiting(round, _) if asked.is_pending() => Some(Arc::as_ptr(round) as usize),
            _ => None,
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn connections_ready_together_share_one_round_and_write_after_all_have_asked() {
        // Connection 0 opens the round (its releaser is queued first); connections 1 and 2
        // become ready after it, so they run after the releaser's first poll. Its yield
        // puts it behind them: all three wait in one round, and none writes before all
        // three have asked.
        let order = Arc::new(Mutex::new(Vec::new()));
        let connection = |n: usize, order: Arc<Mutex<Vec<String>>>| async move {
            let mut turn = Turn::default();
            order.lock().push(format!("ask {n}"));
            let round = ask(&mut turn).await;
            poll_fn(|cx| turn.poll_write_turn(cx)).await;
            order.lock().push(format!("write {n}"));
            turn.flushed();
            assert!(matches!(turn, Turn::Idle));
            round
        };
        let first = {
            let order = order.clone();
            tokio::spawn(async move {
                let mut turn = Turn::default();
                order.lock().push("ask 0".to_string());
                let round = ask(&mut turn).await;
                let others: Vec<_> = (1..3).map(|n| tokio::spawn(connection(n, order.clone()))).collect();
                poll_fn(|cx| turn.poll_write_turn(cx)).await;
                order.lock().push("write 0".to_string());
                let mut rounds = vec![round];
                for o in others {
                    rounds.push(o.await.unwrap());
                }
                rounds
            })
        };
        let rounds = first.await.unwrap();
        assert!(rounds[0].is_some(), "the first answer of a round waits");
        assert_eq!(rounds, vec![rounds[0]; 3], "one round for the three");
        let order = order.lock().clone();
        assert_eq!(&order[..3], ["ask 0", "ask 1", "ask 2"], "{order:?}");
        let mut writes = order[3..].to_vec();
        writes.sort();
        assert_eq!(writes, ["write 0", "write 1", "write 2"], "{order:?}");
    }

    #[test]
    fn a_round_whose_releaser_never_runs_is_released_when_its_runtime_goes() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        // Opened inside the runtime; the runtime goes before its releaser is ever polled.
        let round = runtime.block_on(async { current_round() });
        drop(runtime);
        assert!(round.released());
        // The next round on this thread is a fresh one.
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let next = runtime.block_on(async { current_round() });
        assert!(!Arc::ptr_eq(&round, &next));
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
