//! Ctrl-C or SIGTERM during `fauxpay load`. The first signal while the users run stops
//! the run as goose does (its killswitch: the users finish the checkouts they are in, then
//! the ledger is reconciled and the reports are written) and says so. The run's reports say
//! which signal stopped it (`RunInfo::stopped_by`).
//!
//! - **Ctrl-C** is a person's: the run keeps its gates' exit code. A second Ctrl-C, or one
//!   after the users have stopped, quits at once (exit 130) saying what is left incomplete.
//! - **SIGTERM** is what `docker stop`, Kubernetes (a Job's deadline, a pod evicted or
//!   deleted) and `timeout` send, and an orchestrator sends it once and then kills (a CI
//!   runner may send it after a SIGINT). A run it cut short exits 143 even when its gates
//!   held over the part that ran: a deadline or an eviction is not a pass. A second
//!   SIGTERM while the users still run quits at once (143); one while the run reconciles
//!   never does, so that the reports are whole if the grace period allows (only Ctrl-C or
//!   the SIGKILL ends it there). Before, SIGTERM killed a run with no report at all.
//!
//! SIGTERM is taken from the moment `fauxpay load` starts (before it waits for its target,
//! [`listen`]): until a run's users start it quits at once (143), as it did by default,
//! so a container whose PID 1 is fauxpay, which would otherwise ignore it, still stops.
//!
//! goose installs its own Ctrl-C handler at each run's start unless the process has one.
//! Its second Ctrl-C calls `exit(1)` with only a log line, which `fauxpay load`'s default
//! log filter hides, so a person who pressed twice (or a `timeout -s INT`, which signals
//! the process and then its group) saw the run end with no word and half its reports.
//! The SIGINT handler (ctrlc) is installed at the first run's start, once per process, and
//! goose's steps aside; SIGTERM is taken by a thread of its own (signal-hook), from
//! [`listen`] on.
//!
//! Between runs (`fauxpay demo` runs one per merchant, then may keep serving) a first
//! Ctrl-C is left to whoever else listens for it, as goose's handler left it, and a
//! SIGTERM is noted: once a signal has stopped or ended a run, the next runs stop as their
//! users start, and a Ctrl-C quits. SIGTERM, once taken, no longer ends the process by
//! itself: after `fauxpay demo`'s runs its own handlers hear it too.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, Once};

/// The exit status after a Ctrl-C that quits: 128 + SIGINT, as a shell reports a
/// process that Ctrl-C ended.
pub const QUIT_STATUS: i32 = 130;

/// The exit status after a SIGTERM that quits, or that cut a run short: 128 + SIGTERM.
pub const TERM_STATUS: i32 = 143;

/// How reports name SIGTERM (`RunInfo::stopped_by`).
pub const SIGTERM_NAME: &str = "SIGTERM";

/// The signals that stop a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGINT: Ctrl-C at a terminal.
    Interrupt,
    /// SIGTERM: `kill`, `docker stop`, Kubernetes, `timeout`.
    Terminate,
}

impl Signal {
    /// How the lines and the reports name it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "Ctrl-C",
            Signal::Terminate => SIGTERM_NAME,
        }
    }

    /// goose's reason for its killswitch.
    fn reason(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT received",
            Signal::Terminate => "SIGTERM received",
        }
    }

    /// The exit status when it quits the process.
    fn quit_status(self) -> i32 {
        match self {
            Signal::Interrupt => QUIT_STATUS,
            Signal::Terminate => TERM_STATUS,
        }
    }

    /// How [`STOPPED_BY`] keeps it (0 is none).
    fn code(self) -> u8 {
        match self {
            Signal::Interrupt => 1,
            Signal::Terminate => 2,
        }
    }

    fn from_code(code: u8) -> Option<Signal> {
        match code {
            1 => Some(Signal::Interrupt),
            2 => Some(Signal::Terminate),
            _ => None,
        }
    }
}

/// No run in progress (one ran before).
const IDLE: u8 = 0;
/// The users are running.
const RUNNING: u8 = 1;
/// The users have stopped; the run reconciles and writes its reports.
const FINISHING: u8 = 2;
/// No run has started in this process yet.
const NOT_STARTED: u8 = 3;

static PHASE: AtomicU8 = AtomicU8::new(NOT_STARTED);
/// The last signal that stopped a run of this process, or came while one reconciled or
/// between runs (SIGTERM): 0 none, else [`Signal::code`]. Once set, the next runs stop as
/// their users start.
static STOPPED_BY: AtomicU8 = AtomicU8::new(0);
/// The run's reports folder, while a run is in progress.
static REPORTS: Mutex<Option<PathBuf>> = Mutex::new(None);

/// A run in progress, as the signal handlers see it; dropped when the run returns.
pub struct Armed(());

impl Armed {
    /// The users have stopped: the run reconciles (a Ctrl-C now quits at once). The signal
    /// that stopped them, if one did: what this run's report says, whatever comes after.
    pub(crate) fn users_stopped(&self) -> Option<Signal> {
        PHASE.store(FINISHING, Ordering::SeqCst);
        stopped_by()
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        PHASE.store(IDLE, Ordering::SeqCst);
        *reports() = None;
    }
}

fn reports() -> std::sync::MutexGuard<'static, Option<PathBuf>> {
    REPORTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Installs the handlers (once per process) for a run whose users are about to start,
/// writing its reports to `out`.
pub fn arm(out: &Path) -> Armed {
    *reports() = Some(out.to_path_buf());
    PHASE.store(RUNNING, Ordering::SeqCst);
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        if let Err(e) = ctrlc::set_handler(|| received(Signal::Interrupt)) {
            tracing::debug!("Ctrl-C: goose's own handler stays ({e})");
        }
    });
    listen();
    Armed(())
}

/// Takes SIGTERM from now on (once per process; [`arm`] does too): called as `fauxpay
/// load` starts, before it waits for its target. Until a run's users start, a SIGTERM
/// quits at once. (Ctrl-C is taken only from [`arm`]: before it, its default ends the
/// process, and `fauxpay demo`'s own handler hears it between runs.)
pub fn listen() {
    static LISTEN: Once = Once::new();
    LISTEN.call_once(listen_for_sigterm);
}

/// SIGTERM, taken on a thread of its own for the rest of the process (as ctrlc takes
/// SIGINT): from here on it no longer ends the process by itself.
#[cfg(unix)]
fn listen_for_sigterm() {
    use signal_hook::consts::SIGTERM;
    match signal_hook::iterator::Signals::new([SIGTERM]) {
        Ok(mut signals) => {
            let spawned = std::thread::Builder::new()
                .name("fauxpay-sigterm".into())
                .spawn(move || {
                    for _ in signals.forever() {
                        received(Signal::Terminate);
                    }
                });
            if let Err(e) = spawned {
                tracing::debug!("SIGTERM: no thread to take it, it ends the process as before ({e})");
            }
        }
        Err(e) => tracing::debug!("SIGTERM: not taken, it ends the process as before ({e})"),
    }
}

#[cfg(not(unix))]
fn listen_for_sigterm() {}

/// Called as each user starts: goose clears its killswitch when its run starts, after
/// [`arm`], so a signal that came in between is applied again here.
pub fn users_started() {
    if let (RUNNING, Some(signal)) = (PHASE.load(Ordering::Relaxed), stopped_by()) {
        if !goose::is_killswitch_triggered() {
            goose::trigger_killswitch(signal.reason());
        }
    }
}

/// The last signal that stopped, or asked to stop, a run of this process.
fn stopped_by() -> Option<Signal> {
    Signal::from_code(STOPPED_BY.load(Ordering::SeqCst))
}

/// What a signal does, and the line it prints.
#[derive(Debug, PartialEq, Eq)]
enum Press {
    /// Left to others (Ctrl-C, no run in progress, none stopped before).
    Ignore,
    /// Stop the users, saying so.
    Stop(String),
    /// SIGTERM while the run reconciles, or between runs: noted, so that the next runs
    /// stop as they start; the run in progress goes on to its reports. The line, if any.
    Note(Option<String>),
    /// The line, and the exit status.
    Quit(String, i32),
}

/// `signal` in `phase`, `pressed_before` whether an earlier one stopped a run or was noted.
fn press(signal: Signal, phase: u8, pressed_before: bool, reports: Option<&Path>) -> Press {
    let name = signal.name();
    let again = if pressed_before { " again" } else { "" };
    let quit = match reports {
        Some(dir) => format!(
            "fauxpay load: {name}{again}: quitting now; the reports in {} are incomplete",
            dir.display()
        ),
        None => format!("fauxpay load: {name}{again}: quitting now"),
    };
    match (phase, pressed_before) {
        // Nothing to stop or report yet: as SIGTERM's default would, but saying so.
        (NOT_STARTED, _) if signal == Signal::Terminate => Press::Quit(
            "fauxpay load: SIGTERM: quitting before the run started".into(),
            signal.quit_status(),
        ),
        (NOT_STARTED, _) => Press::Ignore,
        (RUNNING, false) => Press::Stop(format!(
            "fauxpay load: {name}: stopping; the users finish the checkouts they are in, then the ledger is reconciled and the reports written ({} quits at once)",
            match signal {
                Signal::Interrupt => "Ctrl-C again",
                Signal::Terminate => "another SIGTERM or a Ctrl-C",
            }
        )),
        (FINISHING, _) if signal == Signal::Terminate => Press::Note(Some(
            "fauxpay load: SIGTERM: the users have stopped; reconciling and writing the reports before anything else (Ctrl-C quits at once)".into(),
        )),
        (IDLE, _) if signal == Signal::Terminate => Press::Note(None),
        (IDLE, false) => Press::Ignore,
        _ => Press::Quit(quit, signal.quit_status()),
    }
}

/// The handlers (ctrlc's thread and the SIGTERM thread run it, one signal after another).
fn received(signal: Signal) {
    // One signal at a time, whichever thread took it: two arriving together must not
    // both be a first.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = reports().clone();
    match press(
        signal,
        PHASE.load(Ordering::SeqCst),
        stopped_by().is_some(),
        dir.as_deref(),
    ) {
        Press::Ignore => {}
        Press::Stop(line) => {
            eprintln!("{line}");
            STOPPED_BY.store(signal.code(), Ordering::SeqCst);
            goose::trigger_killswitch(signal.reason());
        }
        Press::Note(line) => {
            if let Some(line) = line {
                eprintln!("{line}");
            }
            STOPPED_BY.store(signal.code(), Ordering::SeqCst);
        }
        Press::Quit(line, status) => {
            eprintln!("{line}");
            std::process::exit(status);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_press_stops_the_users_and_any_later_one_quits() {
        let out = Path::new("reports/run-1");
        let ctrl_c = Signal::Interrupt;
        assert!(
            matches!(press(ctrl_c, RUNNING, false, Some(out)), Press::Stop(line) if line.contains("Ctrl-C again quits at once"))
        );
        assert_eq!(
            press(ctrl_c, RUNNING, true, Some(out)),
            Press::Quit(
                "fauxpay load: Ctrl-C again: quitting now; the reports in reports/run-1 are incomplete".into(),
                130
            )
        );
        // The users ended with the run: it reconciles, and a first press quits.
        assert_eq!(
            press(ctrl_c, FINISHING, false, Some(out)),
            Press::Quit(
                "fauxpay load: Ctrl-C: quitting now; the reports in reports/run-1 are incomplete".into(),
                130
            )
        );
        assert!(matches!(press(ctrl_c, FINISHING, true, Some(out)), Press::Quit(_, 130)));
        // Between runs: left to others, unless a press already stopped a run.
        assert_eq!(press(ctrl_c, IDLE, false, None), Press::Ignore);
        assert_eq!(
            press(ctrl_c, IDLE, true, None),
            Press::Quit("fauxpay load: Ctrl-C again: quitting now".into(), 130)
        );
    }

    #[test]
    fn sigterm_stops_a_run_quits_a_stopping_one_and_never_cuts_its_reports() {
        let out = Path::new("reports/run-1");
        let term = Signal::Terminate;
        assert!(matches!(
            press(term, RUNNING, false, Some(out)),
            Press::Stop(line) if line.starts_with("fauxpay load: SIGTERM: stopping;")
                && line.contains("another SIGTERM or a Ctrl-C quits at once")
        ));
        // After either signal stopped the run, the next one quits with its own status.
        assert_eq!(
            press(term, RUNNING, true, Some(out)),
            Press::Quit(
                "fauxpay load: SIGTERM again: quitting now; the reports in reports/run-1 are incomplete".into(),
                143
            )
        );
        assert!(matches!(
            press(Signal::Interrupt, RUNNING, true, Some(out)),
            Press::Quit(_, 130)
        ));
        // Once the users have stopped, SIGTERM (an orchestrator's, or a CI runner's after
        // its SIGINT) never quits: the run finishes its reports; only Ctrl-C quits there.
        for before in [false, true] {
            assert!(matches!(
                press(term, FINISHING, before, Some(out)),
                Press::Note(Some(line)) if line.contains("reconciling and writing the reports")
            ));
        }
        assert!(matches!(
            press(Signal::Interrupt, FINISHING, true, Some(out)),
            Press::Quit(_, 130)
        ));
        // Before any run: it quits at once, as its default did (a PID 1 would ignore it).
        assert_eq!(
            press(term, NOT_STARTED, false, None),
            Press::Quit("fauxpay load: SIGTERM: quitting before the run started".into(), 143)
        );
        // Between runs it is noted, silently: the next run stops as its users start.
        assert_eq!(press(term, IDLE, false, None), Press::Note(None));
        assert_eq!(press(term, IDLE, true, None), Press::Note(None));
    }
}
