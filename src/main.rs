//! The `fauxpay` command line: parse the flags, then call into the library.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use fauxpay::faults;
use fauxpay::provider::{self, Config, CorrelationSource, DuplicatePolicy, IdempotencyMode, Provider};
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "fauxpay",
    version,
    about = "A fake, Stripe-compatible payment provider that catches double charges"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the fake provider: Stripe's /v1 payment API with exact idempotency and a ledger.
    Serve(ServeArgs),
    /// Fire concurrent checkouts at a target API, reconcile with the ledger, gate on anomalies.
    ///
    /// Exit codes: 0 every gate held, 1 a gate failed, 2 bad usage or configuration,
    /// 3 the target or the provider was unreachable before the run started.
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

#[derive(Subcommand)]
enum ReportCommand {
    /// Merge report.json files of load generators run against one provider, and gate.
    Merge(fauxpay_loadtests::MergeArgs),
}

#[derive(Subcommand)]
enum ProfilesCommand {
    /// The bundled fault profiles, with their descriptions.
    List,
    /// Validate fault profiles (files, or bundled names); one line per mistake, exit 2 on any.
    Check {
        #[arg(required = true)]
        profiles: Vec<String>,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Fault profile: a bundled name (see `fauxpay profiles list`) or a path to a TOML file.
    #[arg(long, default_value = "happy", env = "FAUXPAY_PROFILE")]
    profile: String,
    /// Address to listen on; port 0 picks a free port (the start-up line says which).
    #[arg(long, default_value = "127.0.0.1:12111", env = "FAUXPAY_ADDR")]
    addr: SocketAddr,
    /// Idempotency semantics: `stripe` (400 on a reused key with other parameters) or
    /// `ietf` (the IETF Idempotency-Key draft: 422, and keys may be RFC 8941 strings).
    #[arg(long, value_enum, default_value = "stripe")]
    idempotency: IdempotencyMode,
    /// How long a stored idempotent response is kept; afterwards the same key makes a
    /// new payment (e.g. 24h, 10m, 30s).
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    key_ttl: Duration,
    /// With --idempotency ietf: refuse POSTs without an Idempotency-Key (400).
    #[arg(long)]
    require_idempotency_key: bool,
    /// Which request parameter says what logical payment a charge belongs to (its
    /// correlation id); duplicates are found per correlation id.
    #[arg(long, default_value = "metadata.order_id", value_parser = CorrelationSource::parse)]
    correlate: CorrelationSource,
    /// A new key for an already-charged correlation id: `allow` charges again and flags
    /// it (like a real provider), `reject` answers 402 duplicate_transaction.
    #[arg(long, value_enum, default_value = "allow")]
    duplicates: DuplicatePolicy,
    /// Accept only this exact API key (default: any sk_test_… key).
    #[arg(long, env = "FAUXPAY_API_KEY")]
    api_key: Option<String>,
    /// Require `Authorization: Bearer TOKEN` on /__fauxpay/* (except health) and /metrics.
    #[arg(long, env = "FAUXPAY_ADMIN_TOKEN")]
    admin_token: Option<String>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (expected a duration such as 24h, 10m or 30s)"))?;
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    Ok(d)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,goose=error")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let result = match cli.command {
        Command::Serve(args) => serve(args),
        Command::Load(args) => return load(*args),
        Command::Report {
            command: ReportCommand::Merge(args),
        } => {
            return match fauxpay_loadtests::merge(args) {
                Ok(report) => ExitCode::from(fauxpay_loadtests::exit_code(&report)),
                Err(e) => {
                    eprintln!("fauxpay: {e}");
                    ExitCode::from(e.exit_code())
                }
            }
        }
        Command::Profiles {
            command: ProfilesCommand::List,
        } => {
            list_profiles();
            Ok(())
        }
        Command::Profiles {
            command: ProfilesCommand::Check { profiles },
        } => check_profiles(&profiles),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fauxpay: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// `fauxpay load`: 0 every gate held, 1 a gate failed, 2 bad configuration, 3 unreachable.
fn load(args: fauxpay_loadtests::LoadArgs) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fauxpay: starting the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(fauxpay_loadtests::run(args)) {
        Ok(report) => ExitCode::from(fauxpay_loadtests::exit_code(&report)),
        Err(e) => {
            eprintln!("fauxpay: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Loads a profile by bundled name or path; its mistakes become one error, one line each.
fn load_profile(name_or_path: &str) -> anyhow::Result<(faults::Profile, String)> {
    let profile = faults::bundled::load(name_or_path).map_err(|e| anyhow::anyhow!(e.lines().join("\n")))?;
    let source = match faults::bundled::text(name_or_path) {
        Some(text) => text.to_string(),
        None => std::fs::read_to_string(name_or_path).with_context(|| format!("reading {name_or_path}"))?,
    };
    Ok((profile, source))
}

fn list_profiles() {
    for (name, _) in faults::bundled::BUNDLED {
        match faults::bundled::load(name) {
            Ok(p) => println!("{name:<18} {}", p.description),
            Err(e) => println!("{name:<18} INVALID: {}", e.lines().join("; ")),
        }
    }
}

fn check_profiles(profiles: &[String]) -> anyhow::Result<()> {
    let mut failed = false;
    for p in profiles {
        match faults::bundled::load(p) {
            Ok(profile) => println!("{p}: ok ({}: {} rules)", profile.name, profile.rules.len()),
            Err(e) => {
                failed = true;
                for line in e.lines() {
                    eprintln!("{line}");
                }
            }
        }
    }
    if failed {
        anyhow::bail!("invalid fault profile");
    }
    Ok(())
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let (profile, profile_source) = load_profile(&args.profile)?;
    let config = Config {
        profile,
        profile_source,
        idempotency: args.idempotency,
        key_ttl: args.key_ttl,
        require_idempotency_key: args.require_idempotency_key,
        correlate: args.correlate,
        duplicates: args.duplicates,
        api_key: args.api_key,
        admin_token: args.admin_token,
    };
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async move {
        let shutdown = shutdown_signal()?;
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.addr))?;
        let addr = listener.local_addr()?;
        tracing::info!("fauxpay provider listening on http://{addr} ({})", config.describe());
        provider::serve(listener, Provider::new(config), shutdown)
            .await
            .context("serving")?;
        tracing::info!("fauxpay provider stopped");
        Ok(())
    })
}

/// Installs the SIGINT and SIGTERM handlers now (before the start-up line, so a signal
/// sent as soon as the address is known is never lost) and resolves on either.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        Ok(async move {
            tokio::select! {
                _ = int.recv() => {},
                _ = term.recv() => {},
            }
            tracing::info!("shutdown signal received: finishing in-flight requests");
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
            tracing::info!("shutdown signal received: finishing in-flight requests");
        })
    }
}
