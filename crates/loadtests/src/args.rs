//! The command line of `fauxpay load` and `fauxpay report merge`, with goose's own
//! options (users, increase rate, run time, iterations, report files, …) flattened in.

use std::path::PathBuf;
use std::time::Duration;

use goose::config::GooseConfiguration;
use rand::Rng;

use crate::error::ConfigError;

/// Fires concurrent checkouts at a target API, then reconciles them with the ledger.
#[derive(clap::Args, Clone)]
#[command(mut_arg("increase_rate", |a| a
    .help("Users started per second [default: all of --users in the first second]")
    .long_help("Users started per second [default: all of --users in the first second]\n\n\
        How fast goose starts users. Without it or --increase-time, fauxpay starts every \
        user in the first second, as k6 starts its VUs (goose alone starts one a second). \
        A decimal is allowed: 0.5 starts one user every two seconds.\n\n\
        Example: --increase-rate 10")))]
pub struct LoadArgs {
    /// Base URL of the API under test (a merchant, or the provider with --template stripe).
    #[arg(long, value_name = "URL", help_heading = "fauxpay")]
    pub target: String,
    /// Base URL of the fauxpay provider whose ledger is the ground truth.
    #[arg(long, value_name = "URL", help_heading = "fauxpay")]
    pub provider: String,
    /// Request template: a bundled one (checkout-json, stripe, payment-element, checkout-session) or a TOML file (one request, or [[step]]s).
    #[arg(long, default_value = "checkout-json", help_heading = "fauxpay")]
    pub template: String,
    /// Weighted scenarios in place of --template (repeatable or comma-separated), e.g.
    /// checkout.toml=80,browse.toml=20: each iteration runs one, drawn by weight from the
    /// seed. One pays; the others are flows without a payment step (load and latency).
    #[arg(
        long,
        value_name = "TEMPLATE=WEIGHT",
        conflicts_with = "template",
        help_heading = "fauxpay"
    )]
    pub scenario: Vec<String>,
    /// Client behaviours by weight: retry-same-key, retry-new-key, double-submit, no-key.
    #[arg(long, default_value = "retry-same-key=100", help_heading = "fauxpay")]
    pub mix: String,
    /// Per-attempt client timeout.
    #[arg(long, default_value = "2s", value_parser = duration, help_heading = "fauxpay")]
    pub client_timeout: Duration,
    /// How long to wait, before the run, for the provider's health endpoint and the
    /// target to answer (services started a moment ago with `&`, or by docker compose);
    /// 0s: do not wait. Past it, exit 3.
    #[arg(long, default_value = "10s", value_parser = duration, help_heading = "fauxpay")]
    pub wait_ready: Duration,
    /// Attempts per logical payment (the first included).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100), help_heading = "fauxpay")]
    pub max_attempts: u32,
    /// Backoff between attempts: BASE..CAP, exponential with full jitter.
    #[arg(long, default_value = "100ms..2s", value_parser = backoff, help_heading = "fauxpay")]
    pub backoff: (Duration, Duration),
    /// Amount per payment in the smallest unit: N, or MIN..MAX drawn per payment.
    #[arg(long, default_value = "2000", value_parser = amount, help_heading = "fauxpay")]
    pub amount: (u64, u64),
    #[arg(long, default_value = "usd", help_heading = "fauxpay")]
    pub currency: String,
    /// Payment method sent with every checkout (pm_fault_… forces provider faults).
    #[arg(long, default_value = "pm_card_visa", help_heading = "fauxpay")]
    pub payment_method: String,
    /// API key the stripe template sends to the provider (and that reads `GET /v1/events`
    /// for the fulfilment stories).
    #[arg(
        long,
        default_value = "sk_test_fauxpay_load",
        env = "FAUXPAY_API_KEY",
        help_heading = "fauxpay"
    )]
    pub api_key: String,
    /// The provider's --admin-token, if it has one.
    #[arg(long, env = "FAUXPAY_ADMIN_TOKEN", help_heading = "fauxpay")]
    pub admin_token: Option<String>,
    /// Output directory: report.html, report.json, report.md, junit.xml, journal.jsonl, goose-report.html.
    #[arg(long, default_value = "fauxpay-report", help_heading = "fauxpay")]
    pub out: PathBuf,
    /// Prefix of this run's order ids (default: random), so runs never mix in one ledger.
    #[arg(long, help_heading = "fauxpay")]
    pub run_id: Option<String>,
    /// Seed of the run's random choices (default: random; the summary prints it).
    #[arg(long, help_heading = "fauxpay")]
    pub seed: Option<u64>,
    /// Open model: checkouts started per second, fixed (200/s) or a linear ramp over
    /// --run-time (50/s..400/s). --users is then the most checkouts in flight; a start that
    /// finds every user busy is dropped. Without it, users run checkouts back to back.
    #[arg(long, value_parser = crate::arrival::parse_rate, requires = "run_time", help_heading = "open model")]
    pub rate: Option<crate::arrival::Rate>,
    /// How --rate's start times are spread: uniform (1/rate apart) or poisson (seeded by --seed).
    #[arg(long, value_enum, default_value_t, requires = "rate", help_heading = "open model")]
    pub arrivals: crate::arrival::Arrivals,
    /// This run is one of N generators sharing --rate: it starts 1/N of the checkouts.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000), help_heading = "open model")]
    pub generators: u32,
    /// Gate: most double-charged payments allowed.
    #[arg(long, default_value_t = 0, help_heading = "gates")]
    pub max_double_charges: u64,
    /// Gate: most lost charges allowed (client told ok, nothing charged).
    #[arg(long, default_value_t = 0, help_heading = "gates")]
    pub max_lost: u64,
    /// Gate: most phantom charges allowed (client told fail, yet charged).
    #[arg(long, default_value_t = 0, help_heading = "gates")]
    pub max_phantom: u64,
    /// Gate: most captured amounts differing from the requested one.
    #[arg(long, default_value_t = 0, help_heading = "gates")]
    pub max_amount_mismatch: u64,
    /// Gate: most keys answered with two different payments.
    #[arg(long, default_value_t = 0, help_heading = "gates")]
    pub max_inconsistent_replays: u64,
    /// Gate: most payments left without a definite answer (not gated by default).
    #[arg(long, help_heading = "gates")]
    pub max_unresolved: Option<u64>,
    /// Gate: slowest allowed p99 of a payment end to end, retries included (e.g. 3s); with
    /// --rate, counted from each checkout's intended start.
    #[arg(long, value_parser = duration, help_heading = "gates")]
    pub max_p99: Option<Duration>,
    /// Gate: an SLO expression (repeatable), e.g. 'p95(checkout) < 800ms' (a step's, or
    /// payment's end to end, or attempt's), 'error_rate < 1%' (payments not told ok),
    /// 'rate >= 99%' (achieved ÷ asked, with --rate).
    #[arg(long, value_name = "EXPR", help_heading = "gates")]
    pub gate: Vec<String>,
    /// Gate: most start times of --rate dropped because every user was busy (not gated by
    /// default, as k6's dropped_iterations; always reported).
    #[arg(long, requires = "rate", help_heading = "gates")]
    pub max_dropped: Option<u64>,
    /// Show goose's own console output (its launch lines and metrics tables); otherwise
    /// it goes to OUT/goose-stdout.log. goose's telnet controller starts only when its
    /// --telnet-* flags are given, its WebSocket controller only with --websocket.
    #[arg(long, help_heading = "fauxpay")]
    pub goose_output: bool,
    /// Gate: most orders the target fulfilled more than once (default 0 when the template
    /// has a [fulfillment] probe).
    #[arg(long, help_heading = "gates")]
    pub max_double_fulfillments: Option<u64>,
    /// Gate: most orders told ok and charged that the target never fulfilled (default 0
    /// when the template has a [fulfillment] probe).
    #[arg(long, help_heading = "gates")]
    pub max_missed_fulfillments: Option<u64>,
    /// Gate: most cards the --data feeder expected to decline that were charged (default
    /// 0 when the feeder has an `expect` column).
    #[arg(long, help_heading = "gates")]
    pub max_unexpected_charges: Option<u64>,
    /// A data feeder: a CSV file with a header row, or the bundled `stripe-cards` (Stripe's
    /// test cards with what each should do). Each payment takes a row; its columns are
    /// {{column}} placeholders, and payment_method, amount, currency and expect (ok or
    /// fail) act on the payment.
    #[arg(long, value_name = "FILE.csv|stripe-cards", help_heading = "fauxpay")]
    pub data: Option<String>,
    /// How payments take the feeder's rows: in order (payment n, row n, wrapping), drawn
    /// from each payment's seeded generator, or each row once (no more payments than rows).
    #[arg(long, value_enum, default_value = "sequential", help_heading = "fauxpay")]
    pub data_order: crate::feeder::Order,
    /// How long to wait, after the run, for the provider's webhook deliveries to drain
    /// before the fulfilment probe.
    #[arg(long, default_value = "30s", value_parser = duration, help_heading = "fauxpay")]
    pub webhook_drain_timeout: Duration,
    #[command(flatten)]
    pub goose: GooseConfiguration,
    /// Label of the progress line (embedders such as the demo name their run), in
    /// place of the run's start-up line.
    #[arg(skip)]
    pub label: Option<String>,
    /// Print the terminal summary when the run ends (embedders such as the demo print
    /// their own).
    #[arg(skip = true)]
    pub print_summary: bool,
}

/// Combines report.json files of load generators run against one provider.
#[derive(clap::Args, Clone)]
pub struct MergeArgs {
    /// report.json files, or directories holding one report directory per generator
    /// (every DIR/*/report.json, the --out directory excepted).
    #[arg(required = true, num_args = 1..)]
    pub reports: Vec<PathBuf>,
    /// Wait until this many reports are found (generators still running), then merge.
    #[arg(long, value_name = "N")]
    pub expect: Option<usize>,
    /// How long --expect waits before giving up (exit 2).
    #[arg(long, default_value = "0s", value_parser = duration, requires = "expect")]
    pub wait: Duration,
    /// Where the merged report.html, report.json, report.md and junit.xml go.
    #[arg(long, default_value = "fauxpay-report-merged")]
    pub out: PathBuf,
}

pub fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| format!("{e} (expected a duration such as 500ms, 2s or 1m)"))
}

fn backoff(s: &str) -> Result<(Duration, Duration), String> {
    let (a, b) = s.split_once("..").ok_or("expected BASE..CAP, such as 100ms..2s")?;
    let (a, b) = (duration(a)?, duration(b)?);
    if a.is_zero() || b < a {
        return Err("expected 0 < BASE <= CAP".into());
    }
    Ok((a, b))
}

fn amount(s: &str) -> Result<(u64, u64), String> {
    let parse = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|_| format!("'{x}' is not a whole number"))
    };
    let (lo, hi) = match s.split_once("..") {
        Some((a, b)) => (parse(a)?, parse(b)?),
        None => {
            let n = parse(s)?;
            (n, n)
        }
    };
    if lo == 0 || hi < lo || hi > 99_999_999 {
        return Err("expected N or MIN..MAX with 0 < MIN <= MAX <= 99999999".into());
    }
    Ok((lo, hi))
}

impl LoadArgs {
    pub fn run_id(&self) -> Result<String, ConfigError> {
        match &self.run_id {
            Some(id)
                if !id.is_empty()
                    && id.len() <= 40
                    && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
            {
                Ok(id.clone())
            }
            Some(_) => Err(ConfigError::flag("--run-id", "1 to 40 letters, digits, '-' or '_'")),
            None => {
                let mut rng = rand::rng();
                let suffix: String = (0..6)
                    .map(|_| {
                        let n = rng.random_range(0..36u32);
                        char::from_digit(n, 36).unwrap_or('0')
                    })
                    .collect();
                Ok(format!("r{suffix}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_parsers() {
        assert_eq!(
            backoff("100ms..2s").unwrap(),
            (Duration::from_millis(100), Duration::from_secs(2))
        );
        assert!(backoff("2s..1s").is_err());
        assert!(backoff("2s").is_err());
        assert_eq!(amount("500..900").unwrap(), (500, 900));
        assert_eq!(amount("2000").unwrap(), (2000, 2000));
        assert!(amount("0").is_err());
        assert!(amount("9..3").is_err());
    }
}
