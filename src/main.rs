//! The `fauxpay` command line: parse the flags, then call into the library.

#![deny(unsafe_code)]

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use fauxpay_faults as faults;
use fauxpay_merchant::MerchantConfig;
use fauxpay_provider::config::WebhookTarget;
use fauxpay_provider::resources::webhook_endpoints::object::generate_secret;
use fauxpay_provider::resources::webhook_endpoints::rules::check_url;
use fauxpay_provider::webhooks::Settings as DeliverySettings;
use fauxpay_provider::{self as provider, Config};
use tracing_subscriber::EnvFilter;

/// mimalloc rather than glibc's malloc: a payment makes a few dozen small allocations and
/// keeps ~0.9 KB, and glibc spent ~15% of the provider's CPU on them (bench/notes.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use fauxpay::cli::{Cli, Command, MerchantArgs, ProfilesCommand, ReportCommand, ServeArgs};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Without RUST_LOG: fauxpay's own info lines. goose's are its own prints' duplicates,
    // and rustls' certificate verifier logs an ERROR for every https webhook attempt it
    // refuses, which the delivery log (`GET /__fauxpay/webhooks`) already records with
    // its cause.
    let filter = || {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new("info,goose=error,rustls_platform_verifier=off"))
    };
    match demo_log(&cli.command) {
        // The demo's stdout is a story: logs go to a file unless RUST_LOG asks for them.
        Some(file) => tracing_subscriber::fmt()
            .with_env_filter(filter())
            .with_writer(std::sync::Mutex::new(file))
            .with_ansi(false)
            .init(),
        None => tracing_subscriber::fmt()
            .with_env_filter(filter())
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .init(),
    }
    let result = match cli.command {
        Command::Serve(args) => serve(args),
        Command::Merchant(args) => merchant(args),
        Command::Demo(args) => return demo(args),
        Command::Load(args) => return load(*args),
        Command::Report {
            command: ReportCommand::Reconcile(args),
        } => {
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("fauxpay: starting the async runtime: {e}");
                    return ExitCode::from(2);
                }
            };
            return match runtime.block_on(fauxpay_loadtests::reconcile_saved(args)) {
                Ok(report) => ExitCode::from(fauxpay_loadtests::exit_code(&report)),
                Err(e) => {
                    eprintln!("fauxpay: {e}");
                    ExitCode::from(e.exit_code())
                }
            };
        }
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

/// `3 request rules`, `2 webhook rules`, `3 request rules and 2 webhook rules`, `no rules`.
fn rule_counts(requests: usize, webhooks: usize) -> String {
    let count = |n: usize, what: &str| format!("{n} {what} rule{}", if n == 1 { "" } else { "s" });
    match (requests, webhooks) {
        (0, 0) => "no rules".into(),
        (r, 0) => count(r, "request"),
        (0, w) => count(w, "webhook"),
        (r, w) => format!("{} and {}", count(r, "request"), count(w, "webhook")),
    }
}

/// `OUT/demo.log` for `fauxpay demo` without `RUST_LOG` (stderr if it cannot be created).
fn demo_log(command: &Command) -> Option<std::fs::File> {
    let Command::Demo(args) = command else {
        return None;
    };
    if std::env::var_os("RUST_LOG").is_some() {
        return None;
    }
    std::fs::create_dir_all(&args.out).ok()?;
    std::fs::File::create(args.out.join("demo.log")).ok()
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("starting the async runtime")
}

fn merchant(args: MerchantArgs) -> anyhow::Result<()> {
    provider::raise_open_file_limit();
    if !args.addr.ip().is_loopback() {
        tracing::warn!(
            "the merchant listens on {} and has no authentication: anyone who can reach it can place orders",
            args.addr
        );
    }
    let mut config = MerchantConfig::new(args.strategy, args.provider);
    config.flow = args.flow;
    config.redis_url = args.redis;
    config.postgres_url = args.postgres;
    config.pg_schema = args.pg_schema;
    config.api_key = args.api_key;
    config.publishable_key = args.publishable_key;
    config.public_provider_url = args.public_provider;
    config.provider_timeout = args.provider_timeout;
    config.reconcile_interval = args.reconcile_interval;
    config.webhook_secret = args.webhook_secret;
    config.webhook_tolerance = args.webhook_tolerance;
    runtime()?.block_on(async move {
        let shutdown = shutdown_signal()?;
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.addr))?;
        fauxpay_merchant::serve(listener, config, shutdown)
            .await
            .context("serving")?;
        tracing::info!("fauxpay merchant stopped");
        Ok(())
    })
}

/// `fauxpay demo`: 0 when the kit behaved, 1 when it did not, 2 when it could not run.
fn demo(args: fauxpay::demo::DemoArgs) -> ExitCode {
    let result = runtime().map_err(|e| e.to_string()).and_then(|rt| {
        rt.block_on(async {
            let outcome = fauxpay::demo::run(args).await.map_err(|e| e.to_string())?;
            print!("{}", outcome.table());
            if outcome.kit_behaved() {
                println!(
                    "\nThe kit caught naive and lock-only (double charges or double fulfilments) and passed the idempotent merchant."
                );
            } else {
                println!("\nThe kit did not behave as it must (see the verdicts above).");
            }
            print!("{}", outcome.footer());
            if outcome.provider.is_some() {
                if let Ok(stop) = shutdown_signal() {
                    stop.await;
                }
            }
            Ok::<_, String>(outcome.kit_behaved())
        })
    });
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("fauxpay demo: {e}");
            ExitCode::from(2)
        }
    }
}

/// `fauxpay load`: 0 every gate held, 1 a gate failed, 2 bad configuration, 3 unreachable,
/// 4 the ledger unread, 143 every gate held but SIGTERM cut the run short.
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
            Ok(profile) => println!(
                "{p}: ok ({}: {})",
                profile.name,
                rule_counts(profile.rules.len(), profile.webhooks.len())
            ),
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
    let open_files = provider::raise_open_file_limit();
    let config = Config {
        profile,
        profile_source,
        idempotency: args.idempotency.into(),
        key_ttl: args.key_ttl,
        require_idempotency_key: args.require_idempotency_key,
        correlate: args.correlate,
        duplicates: args.duplicates.into(),
        api_key: args.api_key,
        publishable_key: args.publishable_key,
        admin_token: args.admin_token,
        limits: provider::Limits {
            header_timeout: args.header_timeout,
            body_timeout: args.body_timeout,
            max_connections: args
                .max_connections
                .unwrap_or_else(|| provider::Limits::default_max_connections(open_files)),
            shutdown_deadline: args.shutdown_deadline,
        },
        webhooks: Vec::new(),
        delivery: DeliverySettings {
            retries: args.webhook_retries.0,
            timeout: args.webhook_timeout,
            ..DeliverySettings::default()
        },
        event_ttl: args.event_ttl,
        retain: args.retain,
        compact_after: args.compact_after,
        // On loopback only the loopback names (and --allowed-host): a web page cannot
        // reach a developer's fauxpay through DNS rebinding. Elsewhere (a container, a
        // cluster) any name, unless --allowed-host lists them.
        allowed_hosts: {
            let loopback = args.addr.ip().is_loopback();
            let defaults = provider::LOOPBACK_HOSTS
                .iter()
                .filter(|_| loopback)
                .map(|h| h.to_string());
            defaults.chain(args.allowed_host.iter().cloned()).collect()
        },
    };
    if !args.addr.ip().is_loopback() && config.admin_token.is_none() {
        tracing::warn!(
            "listening on {} without --admin-token: anyone who can reach it may read the ledger, reset the state and swap the fault profile",
            args.addr
        );
    }
    let mut config = config;
    let secret = match args.webhook_secret {
        Some(s) if s.trim().is_empty() => anyhow::bail!("--webhook-secret must not be empty"),
        Some(s) => s,
        None => generate_secret(),
    };
    for url in &args.webhooks {
        check_url(url).map_err(|e| anyhow::anyhow!("--webhook {url}: {}", e.message))?;
        config.webhooks.push(WebhookTarget {
            url: url.clone(),
            secret: secret.clone(),
        });
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async move {
        let shutdown = shutdown_signal()?;
        watch_file_size_limit()?;
        // Recovered before listening, so the first request sees the whole state.
        let (provider, recovered) = provider::durable::recovery::open(config, args.data_dir.as_deref(), args.fsync)?;
        if let (Some(summary), Some(dir)) = (recovered, &args.data_dir) {
            // Anything repaired, skipped or diverging is said as a warning: the operator
            // should know the log was damaged, even when nothing was lost.
            if summary.diverged == 0 && summary.repaired.is_empty() && summary.repeats == 0 {
                tracing::info!("{}", summary.describe(dir));
            } else {
                tracing::warn!("{}", summary.describe(dir));
            }
        }
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.addr))?;
        let addr = listener.local_addr()?;
        // The secret is printed as it is (`describe` lowercases its line).
        let mut hooks = match args.webhooks.is_empty() {
            true => String::new(),
            false => format!(" webhooks={} webhook_secret={secret}", args.webhooks.join(",")),
        };
        if let Some(dir) = &args.data_dir {
            let fsync = format!("{:?}", args.fsync).to_lowercase();
            hooks.push_str(&format!(" data_dir={} fsync={fsync}", dir.display()));
        }
        tracing::info!(
            "fauxpay provider listening on http://{addr} ({}{hooks}); dashboard: http://{addr}/__fauxpay/",
            provider.config.describe()
        );
        provider::serve(listener, provider, shutdown).await.context("serving")?;
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

/// SIGXFSZ (the file size limit, `ulimit -f`, reached by the data dir's log) would kill
/// the process with no line said. Handled instead: the write fails with EFBIG, which the
/// log's writer reports (writes answer 503, health says degraded), and this says why.
fn watch_file_size_limit() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        const SIGXFSZ: i32 = 25;
        let mut xfsz = signal(SignalKind::from_raw(SIGXFSZ)).context("installing the SIGXFSZ handler")?;
        tokio::spawn(async move {
            while xfsz.recv().await.is_some() {
                tracing::error!(
                    "the file size limit (ulimit -f) stops the data dir's log from growing: writes answer 503 until the limit is raised or fauxpay is restarted on a larger one"
                );
            }
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn rule_counts_name_both_kinds() {
        assert_eq!(super::rule_counts(0, 2), "2 webhook rules");
        assert_eq!(super::rule_counts(1, 0), "1 request rule");
        assert_eq!(super::rule_counts(12, 1), "12 request rules and 1 webhook rule");
        assert_eq!(super::rule_counts(0, 0), "no rules");
    }
}
