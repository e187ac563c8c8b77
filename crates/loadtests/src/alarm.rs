//! The open model's alarm clock: one wake-up at a time, set and reset at will, awaited
//! on tokio's reactor. On Linux it is a timerfd: the kernel's high-resolution timer,
//! delivered through the runtime's own epoll, so a start costs no thread of its own and
//! no millisecond rounding. Elsewhere it is tokio's timer, which rounds up to whole
//! milliseconds and so wakes ~1 ms late; tests on tokio's paused clock pick that one
//! ([`Alarm::timer`]), since a timerfd keeps real time.

use std::sync::Mutex;
use std::time::Instant;

use tokio::sync::Notify;

/// Rings once at the instant it was last set to.
pub struct Alarm(Inner);

enum Inner {
    #[cfg(target_os = "linux")]
    Fd(tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>),
    Timer {
        at: Mutex<Option<Instant>>,
        reset: Notify,
    },
}

impl Alarm {
    /// The precise alarm where the OS has one (Linux: a timerfd), else tokio's timer.
    /// Call it inside a tokio runtime.
    pub fn new() -> Self {
        #[cfg(target_os = "linux")]
        match Self::timerfd() {
            Ok(alarm) => return alarm,
            Err(e) => tracing::warn!("no timerfd ({e}): starts wake on tokio's millisecond timer"),
        }
        Self::timer()
    }

    /// tokio's timer (whole milliseconds; follows tokio's paused clock in tests).
    pub fn timer() -> Self {
        Self(Inner::Timer {
            at: Mutex::new(None),
            reset: Notify::new(),
        })
    }

    #[cfg(target_os = "linux")]
    fn timerfd() -> std::io::Result<Self> {
        use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
        // CLOCK_MONOTONIC: the clock std's `Instant` reads on Linux.
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // The crate's one `unsafe`: tokio asks its caller to promise that the descriptor
        // stays open and the same while registered. An `OwnedFd` moved into the `AsyncFd`
        // is closed only when the `AsyncFd` drops it, and always reads as the same number.
        #[allow(unsafe_code)]
        // SAFETY: as above.
        let registered = unsafe { tokio::io::unix::AsyncFd::register(fd) };
        Ok(Self(Inner::Fd(registered.map_err(std::io::Error::from)?)))
    }

    /// Whether this alarm is the OS's high-resolution one.
    pub fn is_precise(&self) -> bool {
        !matches!(self.0, Inner::Timer { .. })
    }

    /// Rings at `at` (at once if it has passed), instead of whenever it was set to ring.
    pub fn set(&self, at: Instant) {
        match &self.0 {
            #[cfg(target_os = "linux")]
            Inner::Fd(fd) => {
                use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags, Timespec};
                // A zero value disarms a timerfd: one nanosecond rings at once instead.
                let wait = at
                    .saturating_duration_since(Instant::now())
                    .max(std::time::Duration::from_nanos(1));
                let spec = Itimerspec {
                    it_interval: Timespec { tv_sec: 0, tv_nsec: 0 },
                    it_value: Timespec {
                        tv_sec: wait.as_secs() as _,
                        tv_nsec: wait.subsec_nanos() as _,
                    },
                };
                if let Err(e) = timerfd_settime(fd.get_ref(), TimerfdTimerFlags::empty(), &spec) {
                    tracing::warn!("setting the open model's timerfd: {e}");
                }
            }
            Inner::Timer { at: slot, reset } => {
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(at);
                reset.notify_one();
            }
        }
    }

    /// Waits until it rings (cancel-safe: a ring not yet awaited is kept).
    pub async fn rung(&self) {
        match &self.0 {
            #[cfg(target_os = "linux")]
            Inner::Fd(fd) => loop {
                let Ok(mut ready) = fd.readable().await else {
                    // The reactor lost the fd: fall back to a millisecond's sleep, since
                    // whoever waits looks at the time anyway.
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    return;
                };
                let mut expirations = [0u8; 8];
                match ready.try_io(|fd| rustix::io::read(fd.get_ref(), &mut expirations).map_err(std::io::Error::from))
                {
                    Ok(_) => {
                        // Read, so not readable until it rings again: say so now, or the
                        // next wait reads once more only to learn it (one `read` a ring).
                        // tokio clears only the readiness this guard saw, never a newer one.
                        ready.clear_ready();
                        return;
                    }
                    Err(_would_block) => continue,
                }
            },
            Inner::Timer { at, reset } => loop {
                let reset_seen = reset.notified();
                tokio::pin!(reset_seen);
                reset_seen.as_mut().enable();
                let set = *at.lock().unwrap_or_else(|e| e.into_inner());
                match set {
                    None => reset_seen.await,
                    Some(when) => {
                        tokio::select! {
                            _ = tokio::time::sleep_until(when.into()) => {
                                let mut slot = at.lock().unwrap_or_else(|e| e.into_inner());
                                if *slot == Some(when) {
                                    *slot = None;
                                }
                                return;
                            }
                            _ = reset_seen => {}
                        }
                    }
                }
            },
        }
    }
}

impl Default for Alarm {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn rings_once_at_the_time_it_was_last_set_to() {
        for alarm in [Alarm::new(), Alarm::timer()] {
            let t = Instant::now();
            alarm.set(t + Duration::from_secs(3600));
            alarm.set(t + Duration::from_millis(5));
            alarm.rung().await;
            assert!(Instant::now() >= t + Duration::from_millis(5), "not before its time");
            // Once rung it stays quiet until set again.
            let again = tokio::time::timeout(Duration::from_millis(20), alarm.rung()).await;
            assert!(again.is_err(), "rang twice for one setting");
            alarm.set(Instant::now() - Duration::from_millis(1));
            alarm.rung().await;
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn on_linux_the_alarm_is_a_timerfd() {
        assert!(Alarm::new().is_precise());
        assert!(!Alarm::timer().is_precise());
    }
}
