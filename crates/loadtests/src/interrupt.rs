//! Ctrl-C during `fauxpay load`: the first press while the users run stops the run as
//! goose does (its killswitch: the users finish the checkouts they are in, then the
//! ledger is reconciled and the reports are written) and says so; a second press, or one
//! after the users have stopped, quits at once and says what is left incomplete.
//!
//! goose installs its own handler at each run's start unless the process has one. Its
//! second Ctrl-C calls `exit(1)` with only a log line, which `fauxpay load`'s default
//! log filter hides, so a person who pressed twice (or a `timeout -s INT`, which signals
//! the process and then its group) saw the run end with no word and half its reports.
//! This handler is installed first, once per process, and goose's steps aside.
//!
//! Between runs (`fauxpay demo` runs one per merchant, then may keep serving until
//! Ctrl-C) a first press is left to whoever else listens for it, as goose's handler left
//! it; once a press has stopped a run, any later one quits.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, Once};

/// The exit status after a Ctrl-C that quits: 128 + SIGINT, as a shell reports a
/// process that Ctrl-C ended.
pub const QUIT_STATUS: i32 = 130;

/// No run in progress.
const IDLE: u8 = 0;
/// The users are running.
const RUNNING: u8 = 1;
/// The users have stopped; the run reconciles and writes its reports.
const FINISHING: u8 = 2;

static PHASE: AtomicU8 = AtomicU8::new(IDLE);
/// Whether a Ctrl-C has stopped a run of this process.
static PRESSED: AtomicBool = AtomicBool::new(false);
/// The run's reports folder, while a run is in progress.
static REPORTS: Mutex<Option<PathBuf>> = Mutex::new(None);

/// A run in progress, as the Ctrl-C handler sees it; dropped when the run returns.
pub struct Armed(());

impl Armed {
    /// The users have stopped: from here on a Ctrl-C quits at once.
    pub fn users_stopped(&self) {
        PHASE.store(FINISHING, Ordering::SeqCst);
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

/// Installs the handler (once per process) for a run whose users are about to start,
/// writing its reports to `out`.
pub fn arm(out: &Path) -> Armed {
    *reports() = Some(out.to_path_buf());
    PHASE.store(RUNNING, Ordering::SeqCst);
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        if let Err(e) = ctrlc::set_handler(pressed) {
            tracing::debug!("Ctrl-C: goose's own handler stays ({e})");
        }
    });
    Armed(())
}

/// Called as each user starts: goose clears its killswitch when its run starts, after
/// [`arm`], so a press that came in between is applied again here.
pub fn users_started() {
    if PHASE.load(Ordering::Relaxed) == RUNNING && PRESSED.load(Ordering::Relaxed) && !goose::is_killswitch_triggered()
    {
        goose::trigger_killswitch("SIGINT received");
    }
}

/// What a Ctrl-C does, and the line it prints.
#[derive(Debug, PartialEq, Eq)]
enum Press {
    /// Left to others (no run in progress, none stopped before).
    Ignore,
    Stop(String),
    Quit(String),
}

/// A press in `phase`, `pressed_before` whether an earlier one stopped a run.
fn press(phase: u8, pressed_before: bool, reports: Option<&Path>) -> Press {
    let again = if pressed_before { " again" } else { "" };
    let quit = match reports {
        Some(dir) => format!(
            "fauxpay load: Ctrl-C{again}: quitting now; the reports in {} are incomplete",
            dir.display()
        ),
        None => format!("fauxpay load: Ctrl-C{again}: quitting now"),
    };
    match (phase, pressed_before) {
        (RUNNING, false) => Press::Stop(
            "fauxpay load: Ctrl-C: stopping; the users finish the checkouts they are in, then the ledger is reconciled and the reports written (Ctrl-C again quits at once)".into(),
        ),
        (IDLE, false) => Press::Ignore,
        _ => Press::Quit(quit),
    }
}

/// The handler (ctrlc runs it on a thread of its own, one press after another).
fn pressed() {
    let dir = reports().clone();
    match press(
        PHASE.load(Ordering::SeqCst),
        PRESSED.load(Ordering::SeqCst),
        dir.as_deref(),
    ) {
        Press::Ignore => {}
        Press::Stop(line) => {
            eprintln!("{line}");
            PRESSED.store(true, Ordering::SeqCst);
            goose::trigger_killswitch("SIGINT received");
        }
        Press::Quit(line) => {
            eprintln!("{line}");
            std::process::exit(QUIT_STATUS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_press_stops_the_users_and_any_later_one_quits() {
        let out = Path::new("reports/run-1");
        assert!(
            matches!(press(RUNNING, false, Some(out)), Press::Stop(line) if line.contains("Ctrl-C again quits at once"))
        );
        assert_eq!(
            press(RUNNING, true, Some(out)),
            Press::Quit("fauxpay load: Ctrl-C again: quitting now; the reports in reports/run-1 are incomplete".into())
        );
        // The users ended with the run: it reconciles, and a first press quits.
        assert_eq!(
            press(FINISHING, false, Some(out)),
            Press::Quit("fauxpay load: Ctrl-C: quitting now; the reports in reports/run-1 are incomplete".into())
        );
        assert!(matches!(press(FINISHING, true, Some(out)), Press::Quit(_)));
        // Between runs: left to others, unless a press already stopped a run.
        assert_eq!(press(IDLE, false, None), Press::Ignore);
        assert_eq!(
            press(IDLE, true, None),
            Press::Quit("fauxpay load: Ctrl-C again: quitting now".into())
        );
    }
}
