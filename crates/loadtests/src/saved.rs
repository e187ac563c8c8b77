//! `fauxpay report reconcile DIR --provider URL`: judges a saved run again, once its
//! provider's ledger can be read (a run whose ledger could not be read at its end exits 4
//! with its anomalies unknown). Reads `DIR/report.json` and `DIR/journal.jsonl`, streams
//! the ledger slice of the run from the provider, reconciles, and writes the run's reports
//! in place, gated as at the end of a run. (Fulfilment is not probed again: that needs
//! the target as it was.)

use std::path::PathBuf;
use std::time::Duration;

use crate::error::LoadError;
use crate::ledger::{fetch_ledger, fetch_requests};
use crate::reconcile::reconcile;
use crate::report::Report;

/// What `fauxpay report reconcile` takes.
#[derive(clap::Args, Clone, Debug)]
pub struct ReconcileArgs {
    /// The run's output directory (its --out): report.json and journal.jsonl.
    pub dir: PathBuf,
    /// The provider whose ledger is the truth (default: the one the run used).
    #[arg(long, value_name = "URL")]
    pub provider: Option<String>,
    /// The provider's --admin-token, if it has one.
    #[arg(long, env = "FAUXPAY_ADMIN_TOKEN")]
    pub admin_token: Option<String>,
}

pub async fn reconcile_saved(args: ReconcileArgs) -> Result<Report, LoadError> {
    let mut report = Report::read(&args.dir.join("report.json"))?;
    let [run] = report.runs.as_slice() else {
        return Err(LoadError::Report {
            path: args.dir.join("report.json").display().to_string(),
            reason: "a merged report: reconcile each generator's own directory, then merge".into(),
        });
    };
    let provider = args.provider.clone().unwrap_or_else(|| run.provider.clone());
    let prefix = format!("{}-", run.run_id);
    let payments = crate::journal::read(&args.dir.join("journal.jsonl"))?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| LoadError::Ledger(e.to_string()))?;
    let token = args.admin_token.as_deref();
    let ledger = fetch_ledger(&http, &provider, token, &prefix).await?;
    let requests = fetch_requests(&http, &provider, token, &prefix).await;
    let rec = reconcile(&payments, &ledger, &requests);
    report.outcomes = rec.outcomes;
    report.anomalies = rec.anomalies;
    report.by_behaviour = rec.by_behaviour;
    report.unknown_orders = rec.unknown_orders;
    report.answers_cut = rec.answers_cut;
    report.ledger_unread = None;
    report.gates = report.evaluate();
    crate::output::write_all(&report, &args.dir)?;
    print!("{}", report.summary());
    println!(
        "  reports     {}/ (report.html, report.json, report.md, junit.xml), reconciled against {provider}",
        args.dir.display()
    );
    Ok(report)
}
