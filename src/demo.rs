//! `fauxpay demo`: the whole kit in one process, in under a minute.
//!
//! Starts the three reference merchants (naive, lock-only, idempotent) on their embedded
//! in-memory stores, the provider under a bundled fault profile (default `flaky-network`)
//! with a webhook endpoint for each merchant (`POST /webhooks/stripe`, one signing secret),
//! and runs one load test against each with a realistic client mix; each run drains the
//! provider's deliveries and probes every order's fulfilments. Prints the results side by
//! side and succeeds only when the kit behaved as it must: naive and lock-only caught
//! double-charging (and so fulfilling twice), idempotent clean on every gate.
//!
//! Its standard output reads as a story: a short header (what runs, under which profile,
//! where the dashboard is), the table, and where the reports are; each merchant's run
//! shows one progress line on standard error. Library and merchant logs go to
//! `OUT/demo.log` (the CLI sets that up; with `RUST_LOG` they go to standard error), and
//! goose's console output to each run's `goose-stdout.log`.

use std::fmt::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use fauxpay_loadtests::report::RunVerdict;
use fauxpay_loadtests::{LoadArgs, LoadError, Report};

use fauxpay_faults as faults;
use fauxpay_merchant::checkout_flow::CheckoutFlow;
use fauxpay_merchant::webhook::WebhookSecret;
use fauxpay_merchant::{MerchantConfig, RunningMerchant, Strategy};
use fauxpay_provider::config::WebhookTarget;
use fauxpay_provider::{Config, RunningProvider};

/// The demo's settings (the flags of `fauxpay demo`).
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Fault profile of the provider: a bundled name or a TOML file (default:
    /// flaky-network; duplicate-webhooks with --flow payment-element, where nothing can
    /// be charged twice and a duplicated delivery is what ships an order twice).
    #[arg(long)]
    pub profile: Option<String>,
    /// Concurrent clients per merchant.
    #[arg(long, default_value_t = 10)]
    pub users: usize,
    /// Checkouts per client (so users × payments logical payments per merchant).
    #[arg(long, default_value_t = 30)]
    pub payments: usize,
    /// How customers pay: server-confirm (POST /checkout, the checkout-json template),
    /// payment-element or checkout-session (the customer's browser at the provider, with
    /// Stripe's test cards; the merchants in that flow).
    #[arg(long, default_value = "server-confirm")]
    pub flow: CheckoutFlow,
    /// Client behaviours by weight (see `fauxpay load --help`).
    #[arg(long, default_value = "retry-same-key=80,double-submit=20")]
    pub mix: String,
    /// Where each merchant's reports go (one folder per merchant).
    #[arg(long, default_value = "fauxpay-demo")]
    pub out: PathBuf,
    /// Seed of the clients' random choices.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// After the table, keep the provider running (for its dashboard) until Ctrl-C:
    /// `auto` does when standard output is a terminal.
    #[arg(long, value_enum, default_value = "auto")]
    pub keep_serving: KeepServing,
}

/// Whether the demo's provider outlives the table.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepServing {
    Auto,
    Yes,
    No,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("fault profile: {0}")]
    Profile(String),
    #[error("starting the provider: {0}")]
    Provider(std::io::Error),
    #[error("binding a merchant's port: {0}")]
    Bind(std::io::Error),
    #[error("starting the {0} merchant: {1}")]
    Merchant(&'static str, String),
    #[error("load run against the {0} merchant: {1}")]
    Load(&'static str, LoadError),
}

/// One merchant's result.
pub struct DemoRow {
    pub strategy: Strategy,
    pub report: Report,
}

/// What the demo found, and whether the kit behaved.
pub struct DemoOutcome {
    pub rows: Vec<DemoRow>,
    pub profile: String,
    pub flow: CheckoutFlow,
    /// Where each merchant's reports are.
    pub out: PathBuf,
    /// The provider, still serving its dashboard (when the demo keeps it).
    pub provider: Option<RunningProvider>,
    pub dashboard: String,
    /// The merchants, still serving their storefronts (when the demo keeps the provider).
    pub merchants: Vec<RunningMerchant>,
}

impl DemoOutcome {
    /// Naive and lock-only caught double-charging (or, under webhook faults without
    /// request faults, fulfilling twice); idempotent held every gate over a whole run (not
    /// one SIGTERM cut short).
    pub fn kit_behaved(&self) -> bool {
        self.rows.iter().all(|r| match r.strategy {
            Strategy::Idempotent => r.report.verdict() == RunVerdict::Held,
            _ => r.report.anomalies.double_charges.count > 0 || r.report.anomalies.double_fulfillments.count > 0,
        })
    }

    /// The side-by-side table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\nResults under the `{}` fault profile ({} flow):\n",
            self.profile, self.flow
        );
        let _ = writeln!(
            s,
            "{:<12} {:>9} {:>15} {:>19} {:>6} {:>8} {:>11} {:>10} {:>10}  verdict",
            "merchant",
            "payments",
            "double charges",
            "double fulfilments",
            "lost",
            "phantom",
            "unresolved",
            "p50",
            "p99"
        );
        for r in &self.rows {
            let a = &r.report.anomalies;
            let expected = match r.strategy {
                _ if r.report.terminated() => "cut short by SIGTERM",
                Strategy::Idempotent if r.report.passed() => "clean, as it must be",
                Strategy::Idempotent => "NOT CLEAN: a bug in the reference merchant",
                _ if a.double_charges.count > 0 => "double-charges, as expected",
                _ if a.double_fulfillments.count > 0 => "fulfils twice, as expected",
                _ => "no double charge seen: raise --payments",
            };
            // "-": the provider delivered no webhook, so fulfilment was not checked.
            let fulfillments = if r.report.fulfillment_checked() {
                a.double_fulfillments.count.to_string()
            } else {
                "-".to_string()
            };
            let _ = writeln!(
                s,
                "{:<12} {:>9} {:>15} {:>19} {:>6} {:>8} {:>11} {:>8.1}ms {:>8.1}ms  {expected}",
                r.strategy.as_str(),
                r.report.payments,
                a.double_charges.count,
                fulfillments,
                a.lost.count,
                a.phantom.count,
                a.unresolved.count,
                r.report.latency.payment.p50_ms,
                r.report.latency.payment.p99_ms,
            );
        }
        s
    }

    /// Where the reports (and the dashboard, while it runs) are.
    pub fn footer(&self) -> String {
        let mut s = String::from("\nReports (open report.html in a browser):\n");
        for r in &self.rows {
            let _ = writeln!(
                s,
                "  {:<12} {}",
                r.strategy.as_str(),
                self.out.join(r.strategy.as_str()).join("report.html").display()
            );
        }
        let _ = writeln!(s, "Logs: {}", self.out.join("demo.log").display());
        match &self.provider {
            Some(_) => {
                let _ = writeln!(s, "Dashboard: {} (still serving; Ctrl-C to stop)", self.dashboard);
                let _ = writeln!(s, "Storefronts (pay in a browser; the same profile's faults apply):");
                for m in &self.merchants {
                    let _ = writeln!(s, "  {:<12} {}/", m.strategy.as_str(), m.url());
                }
            }
            None => {
                let _ = writeln!(
                    s,
                    "Dashboard: stopped with the demo (`fauxpay demo --keep-serving yes` keeps it up)"
                );
            }
        }
        s
    }
}

/// The demo's profile for `flow` when none is given: request faults (lost answers, resets)
/// for a server's confirm and a Checkout page's pay; duplicated deliveries for the Payment
/// Element, whose browser confirm cannot charge twice.
pub fn default_profile(flow: CheckoutFlow) -> &'static str {
    match flow {
        CheckoutFlow::PaymentElement => "duplicate-webhooks",
        CheckoutFlow::ServerConfirm | CheckoutFlow::CheckoutSession => "flaky-network",
    }
}

/// The profile's text, for the dashboard's profile page.
fn profile_text(name_or_path: &str) -> String {
    match faults::bundled::text(name_or_path) {
        Some(text) => text.to_string(),
        None => std::fs::read_to_string(name_or_path).unwrap_or_default(),
    }
}

/// The signing secret of the demo's webhook endpoints (one for all three merchants).
pub const DEMO_WEBHOOK_SECRET: &str = "whsec_fauxpay_demo";

/// Runs the demo end to end.
pub async fn run(args: DemoArgs) -> Result<DemoOutcome, DemoError> {
    let profile_arg = args
        .profile
        .clone()
        .unwrap_or_else(|| default_profile(args.flow).to_string());
    let profile = faults::bundled::load(&profile_arg).map_err(|e| DemoError::Profile(e.lines().join("; ")))?;
    let profile_name = profile.name.clone();
    let local: SocketAddr = "127.0.0.1:0".parse().expect("valid address");
    // The merchants' ports first: the provider's webhook endpoints name them.
    let strategies = [Strategy::Naive, Strategy::LockOnly, Strategy::Idempotent];
    let mut listeners = Vec::new();
    for _ in strategies {
        listeners.push(tokio::net::TcpListener::bind(local).await.map_err(DemoError::Bind)?);
    }
    let webhook_urls: Vec<String> = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| format!("http://{a}/webhooks/stripe")))
        .collect::<Result<_, _>>()
        .map_err(DemoError::Bind)?;
    tracing::debug!(?webhook_urls, "demo webhook endpoints");
    let provider = RunningProvider::start(
        Config {
            profile,
            profile_source: profile_text(&profile_arg),
            // Every event goes to each merchant, signed with the demo's one secret.
            webhooks: webhook_urls
                .iter()
                .map(|url| WebhookTarget {
                    url: url.clone(),
                    secret: DEMO_WEBHOOK_SECRET.into(),
                })
                .collect(),
            ..Config::default()
        },
        local,
    )
    .await
    .map_err(DemoError::Provider)?;
    let dashboard = format!("{}/__fauxpay/", provider.url());
    println!(
        "fauxpay demo: the fake provider under the `{profile_name}` fault profile, and three merchants \
         (naive, lock-only, idempotent),\neach driven by {} clients × {} checkouts (mix {}).\nDashboard: {dashboard}\n",
        args.users, args.payments, args.mix
    );
    let secret = WebhookSecret::parse(DEMO_WEBHOOK_SECRET).expect("the demo's secret is valid");
    // Every merchant stays up for the whole demo: each receives every event (and ignores
    // the orders of the others), so no endpoint is ever left without a receiver.
    let mut merchants = Vec::new();
    for (strategy, listener) in strategies.into_iter().zip(listeners) {
        let mut config = MerchantConfig::new(strategy, provider.url());
        config.provider_timeout = std::time::Duration::from_secs(1);
        config.reconcile_interval = std::time::Duration::from_millis(200);
        config.webhook_secret = Some(secret.clone());
        config.flow = args.flow;
        let merchant = RunningMerchant::start_on(config, listener)
            .await
            .map_err(|e| DemoError::Merchant(strategy.as_str(), e.to_string()))?;
        merchants.push(merchant);
    }
    let mut rows = Vec::new();
    for merchant in &merchants {
        let strategy = merchant.strategy;
        let report = fauxpay_loadtests::run(load_args(&args, strategy, &merchant.url(), &provider.url()))
            .await
            .map_err(|e| DemoError::Load(strategy.as_str(), e))?;
        rows.push(DemoRow { strategy, report });
    }
    let keep = match args.keep_serving {
        KeepServing::Yes => true,
        KeepServing::No => false,
        KeepServing::Auto => std::io::IsTerminal::is_terminal(&std::io::stdout()),
    };
    let (provider, merchants) = match keep {
        // A person can now pay in a browser at each merchant's storefront.
        true => (Some(provider), merchants),
        false => {
            for merchant in merchants {
                merchant.shutdown().await;
            }
            let _ = provider.shutdown().await;
            (None, Vec::new())
        }
    };
    Ok(DemoOutcome {
        rows,
        profile: profile_name,
        flow: args.flow,
        out: args.out.clone(),
        provider,
        dashboard,
        merchants,
    })
}

fn load_args(args: &DemoArgs, strategy: Strategy, target: &str, provider: &str) -> LoadArgs {
    #[derive(Parser)]
    struct Load {
        #[command(flatten)]
        args: LoadArgs,
    }
    let out = args.out.join(strategy.as_str());
    let users = args.users.to_string();
    let payments = args.payments.to_string();
    let seed = args.seed.to_string();
    let run_id = format!("demo-{}", strategy.as_str());
    let argv = [
        "load",
        "--target",
        target,
        "--provider",
        provider,
        "--mix",
        &args.mix,
        "--users",
        &users,
        "--increase-rate",
        "1000",
        "--iterations",
        &payments,
        "--client-timeout",
        "1500ms",
        "--max-attempts",
        "5",
        "--backoff",
        "50ms..500ms",
        "--seed",
        &seed,
        "--run-id",
        &run_id,
        "--out",
        out.to_str().unwrap_or("fauxpay-demo"),
        "--quiet",
    ];
    // A browser flow: its bundled template, with Stripe's test cards (paid, declined, 3-D
    // Secure).
    let flow = match args.flow {
        CheckoutFlow::ServerConfirm => Vec::new(),
        f => vec!["--template", f.as_str(), "--data", "stripe-cards"],
    };
    let mut load = Load::try_parse_from(argv.into_iter().chain(flow))
        .expect("the demo's own load arguments are valid")
        .args;
    load.print_summary = false;
    load.label = Some(format!("{:<11}", strategy.as_str()));
    load
}
