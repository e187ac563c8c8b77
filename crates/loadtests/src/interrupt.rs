//! Ctrl-C during `fauxpay load`: the first press while the users run stops the run as
//! goose does (its killswitch: the users finish the checkouts they are in, then the
//! ledger is reconciled and the reports are written) and says so; a second press, or
//! one after the users have stopped, quits at once and says what is left incomplete.
//!
//! goose installs its own handler at each run's start unless the process has one. Its
//! second Ctrl-C calls `exit(1)` with only a log line, which `fauxpay load`'s default
//! log filter hides, so a person who pressed twice (or a `timeout -s INT`, which signals
//! the process and then its group) saw the run end with no word and half its reports.
//! This handler is installed first, once per process, and goose's steps aside.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, Once};

/// The exit status after a Ctrl-C that quits: 128 + SIGINT, as a shell reports a
/// process that Ctrl-C ended.
pub const QUIT_STATUS: i32 = 130;

/// Where the process is, for the handler.
const IDLE: u8 = 0;
/// The users are running; no Ctrl-C yet.
const RUNNING: u8 = 1;
/// Ctrl-C was pressed once: the users stop, then the run reconciles.
const STOPPING: u8 = 2;
/// The users ended with the run; it reconciles and writes its reports.
const RECONCILING: u8 = 3;

static PHASE: AtomicU8 = AtomicU8::new(IDLE);
/// The run's reports folder, while a run is in progress.
static REPORTS: Mutex<Option<PathBuf>> = Mutex::new(None);

/// A run in progress, as the Ctrl-C handler sees it; dropped when the run returns.
pub struct Armed(());

impl Armed {
    /// The users have stopped: from here on a Ctrl-C quits at once.
    pub fn users_stopped(&self) {
        let _ = PHASE.compare_exchange(RUNNING, RECONCILING, Ordering::SeqCst, Ordering::SeqCst);
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

/// What a Ctrl-C does in `phase`, and the line it prints.
#[derive(Debug, PartialEq, Eq)]
enum Press {
    Stop(String),
    Quit(String),
}

fn press(phase: u8, reports: Option<&Path>) -> Press {
    let quit = |what: &str| match reports {
        Some(dir) => Press::Quit(format!(
            "fauxpay load: Ctrl-C{what}: quitting now, before the reconciliation; the reports in {} are incomplete",
            dir.display()
        )),
        None => Press::Quit(format!("fauxpay load: Ctrl-C{what}: quitting now")),
    };
    match phase {
        RUNNING => Press::Stop(
            "fauxpay load: Ctrl-C: stopping; the users finish the checkouts they are in, then the ledger is reconciled and the reports written (Ctrl-C again quits at once)".into(),
        ),
        STOPPING => quit(" again"),
        _ => quit(""),
    }
}

fn pressed() {
    let phase = PHASE
        .compare_exchange(RUNNING, STOPPING, Ordering::SeqCst, Ordering::SeqCst)
        .unwrap_or_else(|now| now);
    let dir = reports().clone();
    match press(phase, dir.as_deref()) {
        Press::Stop(line) => {
            eprintln!("{line}");
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
        assert!(matches!(press(RUNNING, Some(out)), Press::Stop(line) if line.contains("Ctrl-C again quits at once")));
        assert_eq!(
            press(STOPPING, Some(out)),
            Press::Quit(
                "fauxpay load: Ctrl-C again: quitting now, before the reconciliation; the reports in reports/run-1 are incomplete"
                    .into()
            )
        );
        assert!(
            matches!(press(RECONCILING, Some(out)), Press::Quit(line) if line.starts_with("fauxpay load: Ctrl-C: quitting now, before"))
        );
        assert_eq!(
            press(IDLE, None),
            Press::Quit("fauxpay load: Ctrl-C: quitting now".into())
        );
    }
}
