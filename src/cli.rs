//! The `fauxpay` command line's shape: every subcommand and flag, parsed by clap.
//!
//! Kept apart from `main.rs` (which only dispatches) so tests can run the real parser
//! over command lines written elsewhere, such as the services of `docker-compose.yml`.

use std::net::SocketAddr;
use std::time::Duration;

use clap::builder::{EnumValueParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use fauxpay_merchant::checkout_flow::CheckoutFlow;
use fauxpay_merchant::webhook::WebhookSecret;
use fauxpay_merchant::{MerchantConfig, Strategy};
use fauxpay_provider::{CorrelationSource, DuplicatePolicy, IdempotencyMode};

#[derive(Parser)]
#[command(
    name = "fauxpay",
    version,
    about = "A fake, Stripe-compatible payment provider that catches double charges"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the fake provider: Stripe's /v1 payment API with exact idempotency and a ledger.
    Serve(ServeArgs),
    /// The whole kit in one process: provider, three merchants, a load run against each.
    ///
    /// Exits 0 only when naive and lock-only were caught double-charging and idempotent
    /// held every gate.
    Demo(crate::demo::DemoArgs),
    /// Run a reference merchant (a checkout API that pays through the provider).
    Merchant(MerchantArgs),
    /// Fire concurrent checkouts at a target API, reconcile with the ledger, gate on anomalies.
    ///
    /// Exit codes: 0 every gate held, 1 a gate failed, 2 bad usage or configuration,
    /// 3 the target or the provider was unreachable before the run started, 4 the run
    /// ended but the provider's ledger could not be read, 143 every gate held but SIGTERM
    /// cut the run short; 130 quit by a second Ctrl-C or by one after the users stopped,
    /// 143 by a second SIGTERM while they ran (the first Ctrl-C or SIGTERM stops the run
    /// and still reconciles).
    Load(Box<fauxpay_loadtests::LoadArgs>),
    /// Work with load reports.
    Report {
        #[command(subcommand)]
        command: ReportCommand,
    },
    /// List the bundled fault profiles, or check profile files.
    Profiles {
        #[command(subcommand)]
        command: ProfilesCommand,
    },
}

#[derive(clap::Args)]
pub struct MerchantArgs {
    /// naive (no idempotency), lock-only (a lock, nothing durable) or idempotent (the full pattern).
    #[arg(long, value_parser = EnumValueParser::<StrategyArg>::new().map(Strategy::from))]
    pub strategy: Strategy,
    /// How customers pay, so what fulfils an order: server-confirm and payment-element on
    /// payment_intent.succeeded; checkout-session on checkout.session.completed and on the
    /// customer's visit to GET /checkout/success.
    #[arg(long, default_value = "server-confirm")]
    pub flow: CheckoutFlow,
    /// Base URL of the fauxpay provider (or any Stripe-compatible API).
    #[arg(long, env = "FAUXPAY_PROVIDER")]
    pub provider: String,
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080", env = "FAUXPAY_MERCHANT_ADDR")]
    pub addr: SocketAddr,
    /// Redis for the order lock (e.g. redis://127.0.0.1:6379); in memory when absent.
    #[arg(long, env = "FAUXPAY_REDIS")]
    pub redis: Option<String>,
    /// PostgreSQL for key records and orders (e.g. postgres://postgres@127.0.0.1:5432/test); in memory when absent.
    #[arg(long, env = "FAUXPAY_POSTGRES")]
    pub postgres: Option<String>,
    /// PostgreSQL schema for the merchant's tables.
    #[arg(long, default_value = "fauxpay_merchant")]
    pub pg_schema: String,
    /// The provider API key the merchant sends.
    #[arg(long, default_value = MerchantConfig::DEFAULT_API_KEY, env = "FAUXPAY_API_KEY")]
    pub api_key: String,
    /// The publishable key the storefront's browser uses at the provider (the merchant
    /// serves the example storefront at /: docs/stripe-js.md).
    #[arg(long, default_value = MerchantConfig::DEFAULT_PUBLISHABLE_KEY, env = "FAUXPAY_PUBLISHABLE_KEY")]
    pub publishable_key: String,
    /// The provider's URL as a customer's browser reaches it, for the storefront
    /// (default: --provider; set it when the merchant reaches the provider by a name a
    /// browser cannot, such as docker-compose's http://provider:12111).
    #[arg(long, env = "FAUXPAY_PUBLIC_PROVIDER")]
    pub public_provider: Option<String>,
    /// Bound on every provider call.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub provider_timeout: Duration,
    /// How often unresolved (reconciling) orders are looked up at the provider.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub reconcile_interval: Duration,
    /// The webhook endpoint's signing secret (whsec_…): serves POST /webhooks/stripe,
    /// which fulfils orders on signed payment_intent.succeeded events.
    #[arg(long, env = "FAUXPAY_WEBHOOK_SECRET", value_parser = parse_webhook_secret)]
    pub webhook_secret: Option<WebhookSecret>,
    /// How old a webhook signature's timestamp may be.
    #[arg(long, default_value = "300s", value_parser = parse_duration)]
    pub webhook_tolerance: Duration,
}

fn parse_webhook_secret(s: &str) -> Result<WebhookSecret, String> {
    WebhookSecret::parse(s).map_err(|e| e.0)
}

/// The values of `--strategy`: the CLI's own names and help for [`Strategy`] (the domain
/// type knows nothing of clap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    /// No idempotency anywhere: every request charges (double-charges on client retries).
    Naive,
    /// A per-order lock around the provider call and nothing durable: still double-charges
    /// when a retry arrives after the lock is released.
    LockOnly,
    /// Key records, a lock, fenced order states, a stable provider key and reconciliation.
    Idempotent,
}

impl From<StrategyArg> for Strategy {
    fn from(arg: StrategyArg) -> Self {
        match arg {
            StrategyArg::Naive => Strategy::Naive,
            StrategyArg::LockOnly => Strategy::LockOnly,
            StrategyArg::Idempotent => Strategy::Idempotent,
        }
    }
}

#[derive(Subcommand)]
pub enum ReportCommand {
    /// Merge report.json files of load generators run against one provider, and gate.
    Merge(fauxpay_loadtests::MergeArgs),
    /// Reconcile a saved run (its --out directory) against the provider's ledger, and gate:
    /// for a run whose ledger could not be read at its end (exit 4).
    Reconcile(fauxpay_loadtests::ReconcileArgs),
}

#[derive(Subcommand)]
pub enum ProfilesCommand {
    /// The bundled fault profiles, with their descriptions.
    List,
    /// Validate fault profiles (files, or bundled names); one line per mistake, exit 2 on any.
    Check {
        #[arg(required = true)]
        profiles: Vec<String>,
    },
}

/// `--idempotency`: the CLI's names for [`IdempotencyMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IdempotencyArg {
    Stripe,
    Ietf,
}

impl From<IdempotencyArg> for IdempotencyMode {
    fn from(arg: IdempotencyArg) -> Self {
        match arg {
            IdempotencyArg::Stripe => IdempotencyMode::Stripe,
            IdempotencyArg::Ietf => IdempotencyMode::Ietf,
        }
    }
}

/// `--duplicates`: the CLI's names for [`DuplicatePolicy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DuplicatesArg {
    /// Charge again and flag it, as a real provider would.
    Allow,
    /// Refuse with a 402 `duplicate_transaction` decline and count it as blocked.
    Reject,
}

impl From<DuplicatesArg> for DuplicatePolicy {
    fn from(arg: DuplicatesArg) -> Self {
        match arg {
            DuplicatesArg::Allow => DuplicatePolicy::Allow,
            DuplicatesArg::Reject => DuplicatePolicy::Reject,
        }
    }
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Fault profile: a bundled name (see `fauxpay profiles list`) or a path to a TOML file.
    #[arg(long, default_value = "happy", env = "FAUXPAY_PROFILE")]
    pub profile: String,
    /// Address to listen on; port 0 picks a free port (the start-up line says which).
    #[arg(long, default_value = "127.0.0.1:12111", env = "FAUXPAY_ADDR")]
    pub addr: SocketAddr,
    /// Idempotency semantics: `stripe` (400 on a reused key with other parameters) or
    /// `ietf` (the IETF Idempotency-Key draft: 422, and keys may be RFC 8941 strings).
    #[arg(long, value_enum, default_value = "stripe")]
    pub idempotency: IdempotencyArg,
    /// How long a stored idempotent response is kept; afterwards the same key makes a
    /// new payment (e.g. 24h, 10m, 30s).
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    pub key_ttl: Duration,
    /// With --idempotency ietf: refuse POSTs without an Idempotency-Key (400).
    #[arg(long)]
    pub require_idempotency_key: bool,
    /// Which request parameter says what logical payment a charge belongs to (its
    /// correlation id); duplicates are found per correlation id. A Checkout Session's
    /// payment reads its session's parameters: `checkout.client_reference_id` names the
    /// session's own; the default reads the session's metadata[order_id], else its
    /// payment_intent_data[metadata][order_id].
    #[arg(long, default_value = "metadata.order_id", value_parser = CorrelationSource::parse)]
    pub correlate: CorrelationSource,
    /// A new key for an already-charged correlation id: `allow` charges again and flags
    /// it (like a real provider), `reject` answers 402 duplicate_transaction.
    #[arg(long, value_enum, default_value = "allow")]
    pub duplicates: DuplicatesArg,
    /// Accept only this exact API key (default: any sk_test_… key).
    #[arg(long, env = "FAUXPAY_API_KEY")]
    pub api_key: Option<String>,
    /// Accept only this exact publishable key (default: any pk_test_… key), for the
    /// calls a browser makes (Stripe.js: payment methods, intents with their
    /// client_secret).
    #[arg(long, env = "FAUXPAY_PUBLISHABLE_KEY")]
    pub publishable_key: Option<String>,
    /// Require `Authorization: Bearer TOKEN` on /__fauxpay/* (except health) and /metrics.
    #[arg(long, env = "FAUXPAY_ADMIN_TOKEN")]
    pub admin_token: Option<String>,
    /// A request's header must arrive within this (a keep-alive connection idle this
    /// long is closed too).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub header_timeout: Duration,
    /// A request's body must arrive within this once its header is in (else 408).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub body_timeout: Duration,
    /// Connections open at once; more are answered 503 and closed (default: 10000, or
    /// 3/4 of the open-file limit when that is lower).
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// On SIGTERM/SIGINT, how long in-flight requests may take before every
    /// connection is cut and the process exits.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub shutdown_deadline: Duration,
    /// Deliver every event to this URL, signed as Stripe signs webhooks (repeatable).
    #[arg(long = "webhook", value_name = "URL")]
    pub webhooks: Vec<String>,
    /// The signing secret of the --webhook endpoints (default: one generated at start-up
    /// and printed in the start-up line).
    #[arg(long, env = "FAUXPAY_WEBHOOK_SECRET", value_name = "whsec_…")]
    pub webhook_secret: Option<String>,
    /// The waits before each retry of a failed delivery (`none`: no retry): Stripe's
    /// test-mode schedule, compressed for local use.
    #[arg(long, default_value = "1s,10s,1m,5m", value_parser = parse_retry_schedule)]
    pub webhook_retries: RetrySchedule,
    /// A delivery not answered with a 2xx within this is retried.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub webhook_timeout: Duration,
    /// How long events are kept (`GET /v1/events`).
    #[arg(long, default_value = "30d", value_parser = parse_duration)]
    pub event_ttl: Duration,
    /// For soak tests: objects, events and ledger records older than this leave memory
    /// (payment intents, charges, refunds, setup intents, events, unsaved payment
    /// methods; duplicate groups stay whole, and the ledger summary stays exact).
    /// Duplicates are then found within the window. Default: keep everything.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub retain: Option<Duration>,
    /// Keep the state in this directory, so a restart (even after `kill -9`) loses
    /// nothing: objects, idempotency keys, the ledger, events, pending webhook
    /// deliveries, attempt counts and the active profile (default: memory only).
    #[arg(long, env = "FAUXPAY_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,
    /// With --data-dir, when the log is synced to the disk: `always` (before each
    /// answer: survives a machine crash), `batch` (every 100 ms: survives a crash of
    /// fauxpay, a machine crash may lose the last 100 ms) or `never` (the OS decides).
    #[arg(long, default_value = "batch", value_parser = str::parse::<fauxpay_provider::durable::Fsync>)]
    pub fsync: fauxpay_provider::durable::Fsync,
    /// With --data-dir and --retain: compact the log (drop the writes whose effects have
    /// all left the window) each time it has grown by this much since the last
    /// compaction, or by a third of its compacted size when that is more.
    #[arg(long, default_value = "64MiB", value_parser = parse_size, value_name = "SIZE")]
    pub compact_after: u64,
    /// A `Host` name to answer to besides localhost, 127.0.0.1 and [::1] (repeatable). On
    /// loopback fauxpay answers only those, so that a web page cannot reach it through DNS
    /// rebinding; on another address, any name unless this lists them.
    #[arg(long, value_name = "NAME")]
    pub allowed_host: Vec<String>,
}

/// `--webhook-retries`: the waits before each retry.
#[derive(Debug, Clone)]
pub struct RetrySchedule(pub Vec<Duration>);

fn parse_retry_schedule(s: &str) -> Result<RetrySchedule, String> {
    fauxpay_provider::webhooks::delivery::parse_retries(s)
        .map(RetrySchedule)
        .map_err(|e| format!("{e} (expected comma-separated durations such as 1s,10s,1m,5m, or none)"))
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (expected a duration such as 24h, 10m or 30s)"))?;
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    Ok(d)
}

/// A size in bytes: a number with an optional unit (`B`, `KiB`, `MiB`, `GiB`; `K`, `M`,
/// `G` mean the same).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || {
        format!("'{s}' is not a size (expected a number of bytes with an optional unit, such as 64MiB, 512KiB or 1GiB)")
    };
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: u64 = s[..digits].parse().map_err(|_| bad())?;
    let shift = match s[digits..].trim() {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        _ => return Err(bad()),
    };
    match n.checked_mul(1 << shift) {
        Some(0) => Err("must be more than zero".into()),
        Some(bytes) => Ok(bytes),
        None => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1 GiB"), Ok(1 << 30));
        for bad in ["", "MiB", "1.5MiB", "64MB", "0", "-1", "99999999999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn strategy_values_are_the_domain_names() {
        for arg in StrategyArg::value_variants() {
            let name = arg.to_possible_value().map(|v| v.get_name().to_string());
            assert_eq!(name.as_deref(), Some(Strategy::from(*arg).as_str()));
        }
        assert_eq!(StrategyArg::value_variants().len(), Strategy::ALL.len());
    }
}
