//! One load run from start to verdict: check the configuration (exit 2), check that the
//! target and the provider answer (exit 3), run the goose attack with a live progress
//! line, flush the journal, read this run's slice of the ledger, reconcile, (with a
//! fulfilment probe) drain the provider's webhook deliveries and probe every order, write
//! the reports, print the summary, and gate (exit 0 or 1).

use std::time::{Duration, Instant};

use goose::client::GooseClientBuilder;
use goose::config::GooseConfiguration;
use goose::prelude::*;

use crate::alarm::Alarm;
use crate::arrival::{Rate, Schedule};
use crate::open::{Dispatcher, OpenRun};

use crate::args::LoadArgs;
use crate::client::PaymentRecord;
use crate::client::RetryPolicy;
use crate::error::{ConfigError, LoadError};
use crate::fulfillment::{self, FulfillmentReport};
use crate::journal::Journal;
use crate::ledger::LedgerView;
use crate::ledger::{fetch_ledger, fetch_requests};
use crate::mix::Mix;
use crate::progress;
use crate::reconcile::reconcile;
use crate::reconcile::Anomalies;
use crate::report::{Measured, Report, RunInfo, RunVerdict, Thresholds};
use crate::scenario::{RunSetup, RunState};
use crate::timeline::{provider_profile, Timeline};

/// Checkouts per goose user when neither --iterations nor --run-time is given.
pub const DEFAULT_ITERATIONS: usize = 25;

/// Runs a load test; the report says whether every gate held.
pub async fn run(args: LoadArgs) -> Result<Report, LoadError> {
    // SIGTERM from here: before the run it quits at once, during it stops the users
    // (crate::interrupt).
    crate::interrupt::listen();
    let data = args
        .data
        .as_deref()
        .map(|d| crate::feeder::Feeder::load(d, args.data_order))
        .transpose()?;
    let columns = data.as_ref().map(|d| d.columns.clone()).unwrap_or_default();
    let (crate::plan::Plan { template, flow }, scenarios) = plan(&args, &columns)?;
    let mix = Mix::parse(&args.mix)?;
    let run_id = args.run_id()?;
    let seed = args.seed.unwrap_or_else(rand::random);
    let target = base_url("--target", &args.target)?;
    let provider = base_url("--provider", &args.provider)?;
    let thresholds = Thresholds {
        max_double_charges: args.max_double_charges,
        max_lost: args.max_lost,
        max_phantom: args.max_phantom,
        max_amount_mismatch: args.max_amount_mismatch,
        max_inconsistent_replays: args.max_inconsistent_replays,
        max_unresolved: args.max_unresolved,
        max_p99_ms: args.max_p99.map(|d| d.as_secs_f64() * 1000.0),
        max_dropped: args.max_dropped,
        max_double_fulfillments: None,
        max_missed_fulfillments: None,
        max_unexpected_charges: None,
        slo: slo_gates(
            &args.gate,
            &measured_names(flow.as_ref(), scenarios.as_ref()),
            &scenarios
                .iter()
                .flat_map(|s| s.list.iter().map(|s| s.name.clone()))
                .collect::<Vec<_>>(),
        )?,
    };
    let mut thresholds = thresholds;
    if columns.iter().any(|c| c == "expect") {
        thresholds.max_unexpected_charges = Some(args.max_unexpected_charges.unwrap_or(0));
    } else if args.max_unexpected_charges.is_some() {
        return Err(ConfigError::flag(
            "--max-unexpected-charges",
            "a --data feeder with an expect column (ok or fail per row), such as stripe-cards",
        )
        .into());
    }
    if template.fulfillment.is_some() {
        thresholds.max_double_fulfillments = Some(args.max_double_fulfillments.unwrap_or(0));
        thresholds.max_missed_fulfillments = Some(args.max_missed_fulfillments.unwrap_or(0));
    } else {
        for (flag, set) in [
            ("--max-double-fulfillments", args.max_double_fulfillments.is_some()),
            ("--max-missed-fulfillments", args.max_missed_fulfillments.is_some()),
        ] {
            if set {
                return Err(ConfigError::new(
                    flag,
                    "fulfillment",
                    format!(
                        "a template with a [fulfillment] probe (template `{}` has none)",
                        template.name
                    ),
                )
                .into());
            }
        }
    }
    let mut goose_config = args.goose.clone();
    refuse_goose_thresholds(&goose_config)?;
    goose_config.host = Some(target.clone());
    let open = open_model(&args, &mut goose_config, seed)?;
    launch_all_at_once(&mut goose_config);
    if goose_config.iterations.is_none() && goose_config.run_time.is_none() {
        goose_config.iterations = Some(DEFAULT_ITERATIONS);
    }
    if let Some(data) = data.as_ref().filter(|d| d.order() == crate::feeder::Order::Once) {
        // Every row once: as many payments as rows at most, known before the run.
        let payments = match (open.is_some(), goose_config.run_time.is_some(), goose_config.iterations) {
            (false, false, Some(i)) => Some(i as u64 * goose_config.users.unwrap_or(1).max(1) as u64),
            _ => None,
        }
        // With --scenario, the iterations that pay (browse runs may take a row again).
        .map(|iterations| match &scenarios {
            Some(s) => s.paying_among(seed, iterations),
            None => iterations,
        });
        if payments.is_none_or(|p| p > data.rows() as u64) {
            return Err(ConfigError::flag(
                "--data-order once",
                format!(
                    "--users × --iterations of at most the feeder's {} rows (and no --run-time or --rate), so that no row is taken twice",
                    data.rows()
                ),
            )
            .into());
        }
    }
    goose_config.no_print_metrics = true;
    // goose's telnet controller grabs a port (5116): only when asked for. Its WebSocket
    // controller is off unless `--websocket` is given (goose 0.19; setting its deprecated
    // `no_websocket` logged a warning on every run and made `--websocket` alone exit 2).
    if goose_config.telnet_host.is_none() && goose_config.telnet_port.is_none() {
        goose_config.no_telnet = true;
    }
    std::fs::create_dir_all(&args.out).map_err(|e| LoadError::io(&args.out, e))?;
    if goose_config.report_file.is_empty() {
        goose_config
            .report_file
            .push(args.out.join("goose-report.html").display().to_string());
    }

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| LoadError::Goose(e.to_string()))?;
    preflight(&http, &target, &provider, args.wait_ready).await?;
    let admin_token = args.admin_token.as_deref();
    // The delivery counters before the run: fulfilment is judged only if webhooks flowed.
    let deliveries_before = match template.fulfillment {
        Some(_) => Some(fulfillment::drain(&http, &provider, admin_token, Duration::ZERO).await),
        None => None,
    };

    let journal = Journal::create(&args.out.join("journal.jsonl"))?;
    let state = RunState::new(RunSetup {
        run_id: run_id.clone(),
        seed,
        template,
        flow,
        scenarios,
        data,
        mix: mix.clone(),
        policy: RetryPolicy {
            max_attempts: args.max_attempts,
            timeout: args.client_timeout,
            backoff_base: args.backoff.0,
            backoff_cap: args.backoff.1,
        },
        amount: args.amount,
        currency: args.currency.as_str().into(),
        payment_method: args.payment_method.as_str().into(),
        api_key: args.api_key.as_str().into(),
        provider: args.provider.as_str().into(),
        journal,
    });
    if args.label.is_none() {
        eprintln!("fauxpay load: run {run_id} (seed {seed}) against {target}; ledger at {provider}");
    }
    let started_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let started = Instant::now();
    let (scenario, dispatcher) = match &open {
        None => (state.scenario(), None),
        Some(o) => {
            let dispatcher = Dispatcher::new(o.users as usize, state.counters.clone(), &o.schedule, Alarm::new());
            let pacer = tokio::spawn(dispatcher.clone().pace());
            (state.open_scenario(dispatcher.clone()), Some((dispatcher, pacer)))
        }
    };
    // The open model's run counts from its schedule's start, as its rate does: launching
    // the pre-allocated users before it (goose starts them at --increase-rate) is not
    // part of the run, as k6 does not count allocating its VUs.
    let measured_from = {
        let schedule = dispatcher.as_ref().map(|(dispatcher, _)| dispatcher.clone());
        move || schedule.as_ref().and_then(|d| d.schedule_started()).unwrap_or(started)
    };
    let stop_progress = progress::spawn(state.counters.clone(), measured_from.clone(), args.label.clone());
    // goose prints to stdout ("10 users launched."): into a file, unless asked for.
    let quiet_goose = match args.goose_output {
        true => None,
        false => {
            let path = args.out.join("goose-stdout.log");
            let file = std::fs::File::create(&path).map_err(|e| LoadError::io(&path, e))?;
            gag::Redirect::stdout(file).ok()
        }
    };
    // One HTTP client for every user (goose's defaults, no cookie store, which checkouts
    // never use), sharing one connection pool: a client per user would read the
    // system's CA certificates once per user (~3.6 ms of CPU each) and keep a copy of
    // them in each.
    // Ctrl-C or SIGTERM from here: the first stops the users, a second quits
    // (crate::interrupt).
    let armed = crate::interrupt::arm(&args.out);
    let attack = GooseAttack::initialize_with_config(goose_config)
        .map_err(|e| LoadError::Goose(e.to_string()))?
        .set_client_builder_without_cookies(GooseClientBuilder::new().without_cookies())
        .map_err(|e| LoadError::Goose(e.to_string()))?
        .register_scenario(scenario)
        .execute()
        .await;
    let stopped_by = armed.users_stopped();
    drop(quiet_goose);
    let _ = stop_progress.send(());
    let measured_from = measured_from();
    let open_report = dispatcher.map(|(dispatcher, pacer)| {
        pacer.abort();
        let o = open.expect("a dispatcher only with the open model");
        dispatcher.report(OpenRun {
            rate: o.asked.to_string(),
            generators: args.generators,
            arrivals: args.arrivals,
            users: o.users,
            run_time_secs: o.schedule.duration.as_secs_f64(),
        })
    });
    let duration = measured_from.elapsed();
    attack.map_err(|e| LoadError::Goose(e.to_string()))?;

    let state = std::sync::Arc::try_unwrap(state).map_err(|_| LoadError::Goose("load tasks still running".into()))?;
    let payments = state.setup.journal.finish()?;
    let prefix = format!("{run_id}-");
    // Without the ledger the run is still reported (what the clients saw, the latency),
    // its anomalies unknown, and exits 4; `fauxpay report reconcile` judges it later.
    let (ledger, ledger_unread) = match fetch_ledger(&http, &provider, args.admin_token.as_deref(), &prefix).await {
        Ok(ledger) => (ledger, None),
        Err(LoadError::Ledger(why)) => (Default::default(), Some(why)),
        Err(e) => (Default::default(), Some(e.to_string())),
    };
    let requests = fetch_requests(&http, &provider, args.admin_token.as_deref(), &prefix).await;
    let mut rec = reconcile(&payments, &ledger, &requests);
    if ledger_unread.is_some() {
        rec.anomalies = Default::default();
        rec.unknown_orders = 0;
    }
    let fulfillment = match (&state.setup.template.fulfillment, deliveries_before) {
        (Some(_), Some(_)) if ledger_unread.is_some() => None,
        (Some(probe), Some(before)) => Some(
            check_fulfillment(
                Fulfill {
                    http: &http,
                    target: &target,
                    provider: &provider,
                    admin_token,
                    api_key: &args.api_key,
                    drain_timeout: args.webhook_drain_timeout,
                    probe,
                    before,
                },
                &payments,
                &ledger,
                &requests,
                &mut rec.anomalies,
            )
            .await,
        ),
        _ => None,
    };
    if fulfillment.as_ref().is_some_and(|f| !f.checked) {
        // Not judged (no webhooks flowed): gate only what was asked for explicitly, and
        // that gate fails ("not checked").
        thresholds.max_double_fulfillments = args.max_double_fulfillments;
        thresholds.max_missed_fulfillments = args.max_missed_fulfillments;
    }
    let mut timeline = Timeline::build(&payments, &ledger, started_ms);
    timeline
        .profiles
        .extend(provider_profile(&http, &provider, args.admin_token.as_deref()).await);
    let report = Report::new(
        Measured {
            run: RunInfo {
                run_id,
                target,
                provider,
                // As given (a bundled name or a file's path), so the report's command
                // reproduces it.
                template: match &state.setup.scenarios {
                    Some(s) => s.describe(),
                    None => args.template.clone(),
                },
                scenario: (!args.scenario.is_empty()).then(|| args.scenario.join(",")),
                mix: mix.to_string(),
                seed,
                started_ms,
                duration_secs: duration.as_secs_f64(),
                payments: payments.len() as u64,
                stopped_by: stopped_by.map(|s| s.name().to_string()),
            },
            attempts: payments.iter().map(|p| p.attempts.len() as u64).sum(),
            outcomes: rec.outcomes,
            anomalies: rec.anomalies,
            by_behaviour: rec.by_behaviour,
            unknown_orders: rec.unknown_orders,
            answers_cut: rec.answers_cut,
            attempt_latency: state.attempt_latency.into_inner().unwrap_or_else(|e| e.into_inner()),
            payment_latency: state.payment_latency.into_inner().unwrap_or_else(|e| e.into_inner()),
            step_latency: state.step_latency.into_inner().unwrap_or_else(|e| e.into_inner()),
            scenarios: match &state.setup.scenarios {
                Some(s) => s
                    .list
                    .iter()
                    .zip(
                        state
                            .scenario_tally
                            .into_inner()
                            .unwrap_or_else(|e| e.into_inner())
                            .iter(),
                    )
                    .map(|(s, t)| crate::report::ScenarioReport::new(s, t))
                    .collect(),
                None => Vec::new(),
            },
            fulfillment,
        },
        thresholds,
    );
    let mut report = match open_report {
        Some(o) => report.with_open(o),
        None => report,
    };
    if let Some(why) = ledger_unread {
        report = report.ledger_unread(why);
    }
    report.timeline = timeline;
    crate::output::write_all(&report, &args.out)?;
    if args.print_summary {
        print!("{}", report.summary());
        println!(
            "  reports     {}/ (report.html, report.json, report.md, junit.xml, journal.jsonl, goose-report.html)",
            args.out.display()
        );
    }
    Ok(report)
}

/// Where and how to check fulfilment.
struct Fulfill<'a> {
    http: &'a reqwest::Client,
    target: &'a str,
    provider: &'a str,
    admin_token: Option<&'a str>,
    /// For `GET /v1/events` (the stories join deliveries to orders through events).
    api_key: &'a str,
    drain_timeout: Duration,
    probe: &'a crate::template::Probe,
    before: Result<fulfillment::DrainStatus, fulfillment::DrainError>,
}

/// Drains the provider's deliveries, probes every order and adds the fulfilment
/// anomalies to `anomalies`.
async fn check_fulfillment(
    f: Fulfill<'_>,
    payments: &[PaymentRecord],
    ledger: &LedgerView,
    requests: &std::collections::HashMap<String, Vec<crate::ledger::ProviderRequest>>,
    anomalies: &mut Anomalies,
) -> FulfillmentReport {
    let after = fulfillment::drain(f.http, f.provider, f.admin_token, f.drain_timeout).await;
    if let Err(why) = fulfillment::checkable(&f.before, &after) {
        return FulfillmentReport::unchecked(f.probe, why);
    }
    let after = after.unwrap_or_default();
    let before = f.before.unwrap_or_default();
    if !after.drained {
        tracing::warn!(
            queued = after.queued,
            in_flight = after.in_flight,
            retrying = after.retrying,
            "webhook deliveries still pending after {:?}: probing anyway",
            f.drain_timeout
        );
    }
    let orders = payments.iter().map(|p| p.order_id.clone()).collect();
    let probes = fulfillment::probe_all(f.http, f.target, f.probe, orders).await;
    let none = Vec::new();
    let story = |p: &PaymentRecord| {
        crate::reconcile::story(
            p,
            ledger.charges.get(&p.order_id).unwrap_or(&none),
            requests.get(&p.order_id),
        )
    };
    let no_events = std::collections::HashMap::new();
    let mut findings = fulfillment::judge(payments, &probes, ledger, &[], &no_events, f.target, story);
    // The examples' stories get the provider's deliveries of their events.
    let examples: std::collections::HashSet<String> = findings
        .double
        .examples
        .iter()
        .chain(&findings.missed.examples)
        .map(|e| e.order_id.clone())
        .collect();
    if !examples.is_empty() {
        let log = fulfillment::fetch_deliveries(f.http, f.provider, f.admin_token).await;
        let events = fulfillment::fetch_event_ids(f.http, f.provider, f.api_key, &examples).await;
        findings = fulfillment::judge(payments, &probes, ledger, &log, &events, f.target, story);
    }
    anomalies.double_fulfillments = findings.double;
    anomalies.extra_fulfillments = findings.extra;
    anomalies.missed_fulfillments = findings.missed;
    FulfillmentReport {
        probe: f.probe.describe.clone(),
        checked: true,
        note: (!after.drained).then(|| {
            format!(
                "the provider's webhook deliveries had not drained after {}: {} queued, {} in flight, {} retrying",
                humantime::format_duration(f.drain_timeout),
                after.queued,
                after.in_flight,
                after.retrying
            )
        }),
        probed: findings.probed,
        probe_failures: findings.probe_failures,
        probe_failure_examples: findings.failure_examples,
        drained: after.drained,
        deliveries_delivered: after.delivered.saturating_sub(before.delivered),
        deliveries_failed: after.failed.saturating_sub(before.failed),
    }
}

/// The open model asked for by `--rate`, checked against goose's own options.
struct OpenModel {
    /// `--rate` as asked (all generators together).
    asked: Rate,
    users: u64,
    schedule: Schedule,
}

/// With `--rate`: the schedule, and goose set to run every user once, all started before
/// the first checkout, with the schedule (not goose) deciding when the run ends.
/// goose's own `--threshold` rules stop a run the moment one fails, before fauxpay has
/// reconciled anything: the run would exit without its report or its anomaly counts. They
/// are refused, naming fauxpay's gates, which judge the whole run after reconciliation.
fn refuse_goose_thresholds(goose: &GooseConfiguration) -> Result<(), ConfigError> {
    let flag = if !goose.threshold.is_empty() {
        "--threshold"
    } else if goose.no_threshold_abort {
        "--no-threshold-abort"
    } else if goose.threshold_abort_delay.is_some() {
        "--threshold-abort-delay"
    } else {
        return Ok(());
    };
    Err(ConfigError::flag(
        flag,
        "no goose threshold: a failing one would stop the run before reconciliation. Gate with fauxpay's own instead (--max-p99, --max-double-charges, --max-lost, --max-phantom, --max-unresolved, --max-dropped, …: `fauxpay load --help`, \"gates\")",
    ))
}

fn open_model(args: &LoadArgs, goose: &mut GooseConfiguration, seed: u64) -> Result<Option<OpenModel>, ConfigError> {
    let Some(asked) = args.rate else {
        return Ok(None);
    };
    if goose.iterations.is_some() {
        return Err(ConfigError::flag(
            "--iterations",
            "no --iterations with --rate (the rate and --run-time decide how many checkouts start)",
        ));
    }
    let users = goose.users.filter(|u| *u > 0).ok_or_else(|| {
        ConfigError::flag(
            "--users",
            "the most checkouts in flight at once with --rate (as k6's preAllocatedVUs), such as --users 50",
        )
    })?;
    let run_time = goose.run_time.take().unwrap_or_default();
    let duration = goose_time(&run_time)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| ConfigError::flag("--run-time", "a time such as 30s, 2m or 1h30m with --rate"))?;
    goose.iterations = Some(1);
    Ok(Some(OpenModel {
        asked,
        users: users as u64,
        schedule: Schedule {
            rate: asked.share(args.generators),
            duration,
            arrivals: args.arrivals,
            seed,
        },
    }))
}

/// Without --increase-rate or --increase-time, every user starts in the first second (as
/// k6 starts its VUs), not goose's one user per second: `--users 300 --iterations 2` would
/// otherwise spend five minutes launching users for a few seconds of checkouts.
fn launch_all_at_once(goose: &mut GooseConfiguration) {
    if let Some(users) = goose.users.filter(|u| *u > 0) {
        if goose.increase_rate.is_none() && goose.increase_time.is_none() {
            goose.increase_rate = Some(users.to_string());
        }
    }
}

/// Goose's TIME: whole seconds, or hours, minutes and seconds such as 1h30m.
fn goose_time(s: &str) -> Option<Duration> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    humantime::parse_duration(s).ok()
}

fn base_url(flag: &str, s: &str) -> Result<String, ConfigError> {
    let url = reqwest::Url::parse(s)
        .map_err(|e| ConfigError::flag(flag, format!("an http(s) URL such as http://127.0.0.1:8080 ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(ConfigError::flag(flag, "an http(s) URL such as http://127.0.0.1:8080"));
    }
    Ok(s.trim_end_matches('/').to_string())
}

/// Exit 3 before the run when the provider's health endpoint or the target does not
/// answer within `wait` (one line says that it waits, if it has to).
async fn preflight(http: &reqwest::Client, target: &str, provider: &str, wait: Duration) -> Result<(), LoadError> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut said = false;
    loop {
        match ready(http, target, provider).await {
            Ok(()) => return Ok(()),
            Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
            Err(_) => {
                if !said {
                    eprintln!(
                        "fauxpay load: waiting up to {} for the provider ({provider}) and the target ({target}) to answer",
                        humantime::format_duration(wait)
                    );
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Whether the provider's health endpoint answers 2xx and the target answers at all.
async fn ready(http: &reqwest::Client, target: &str, provider: &str) -> Result<(), LoadError> {
    let health = format!("{provider}/__fauxpay/health");
    let unreachable = |what, url: &str, reason: String| LoadError::Unreachable {
        what,
        url: url.to_string(),
        reason,
    };
    match http.get(&health).timeout(Duration::from_secs(5)).send().await {
        Ok(r) if r.status().is_success() => {}
        Ok(r) => return Err(unreachable("the provider", &health, format!("answered {}", r.status()))),
        Err(e) => return Err(unreachable("the provider", &health, e.to_string())),
    }
    // Any HTTP answer from the target will do: the point is that it listens.
    if let Err(e) = http.get(target).timeout(Duration::from_secs(5)).send().await {
        return Err(unreachable("the target", target, e.to_string()));
    }
    Ok(())
}

/// Exit code for a finished run: 0 when every gate held, 1 when one failed, 4 when the
/// provider's ledger could not be read, so the anomalies are unknown, 143 when every gate
/// held but SIGTERM cut the run short. (2 is bad usage or configuration, 3 a target or
/// provider unreachable before the run; 130 and 143 also end a run quit by a second
/// signal, before its reports.)
pub fn exit_code(report: &Report) -> u8 {
    match report.verdict() {
        RunVerdict::Unknown => 4,
        RunVerdict::Failed => 1,
        // As a shell reports a process SIGTERM ended: a run cut short by a deadline or an
        // eviction is not a pass (its reports are whole, for what ran).
        RunVerdict::CutShort => crate::interrupt::TERM_STATUS as u8,
        RunVerdict::Held => 0,
    }
}

/// The run's plan: `--template`'s, or with `--scenario` the one scenario that pays, and
/// the scenarios. Names must not mix up: a scenario's, a step's, `payment` and `attempt`
/// each name one latency for `--gate`.
fn plan(
    args: &LoadArgs,
    columns: &[String],
) -> Result<(crate::plan::Plan, Option<crate::scenarios::Scenarios>), ConfigError> {
    use crate::plan::{Loaded, Plan};
    if args.scenario.is_empty() {
        return Ok((Plan::load_with(&args.template, columns)?, None));
    }
    let weighted = crate::scenarios::parse(&args.scenario)?;
    let mut paying: Option<(String, Plan)> = None;
    let mut list = Vec::new();
    let mut names: Vec<(String, String)> = Vec::new();
    for w in &weighted {
        let loaded = Plan::load_scenario(&w.template, columns)?;
        let name = loaded.name().to_string();
        let steps: Vec<String> = loaded.step_names().iter().map(|s| s.to_string()).collect();
        for (what, n) in std::iter::once(("scenario", name.as_str())).chain(steps.iter().map(|n| ("step", n.as_str())))
        {
            let taken = ["payment", "attempt"].contains(&n).then(|| "--gate's own".to_string());
            if let Some(by) = taken.or_else(|| names.iter().find(|(m, _)| m == n).map(|(_, by)| by.clone())) {
                return Err(ConfigError::flag(
                    "--scenario",
                    format!(
                        "scenarios and steps with names of their own (each names a latency for --gate), but {what} '{n}' of {} is also {by}",
                        w.template
                    ),
                ));
            }
            names.push((n.to_string(), format!("a name in {}", w.template)));
        }
        let browse = match loaded {
            Loaded::Pays(plan) => {
                if let Some((other, _)) = &paying {
                    return Err(ConfigError::flag(
                        "--scenario",
                        format!(
                            "exactly one scenario that pays, but {other} and {} both have a payment step",
                            w.template
                        ),
                    ));
                }
                paying = Some((w.template.clone(), *plan));
                None
            }
            Loaded::Browses { flow, .. } => Some(flow),
        };
        list.push(crate::scenarios::Scenario {
            name,
            weight: w.weight,
            browse,
            steps,
        });
    }
    let Some((_, plan)) = paying else {
        return Err(ConfigError::flag(
            "--scenario",
            "one scenario that pays (a template with a payment step), beside flows that only browse",
        ));
    };
    Ok((plan, Some(crate::scenarios::Scenarios::new(list))))
}

/// What `--gate` percentiles may name: `payment`, `attempt`, every step, and with
/// `--scenario` every scenario and its steps (`plan` refused names used twice; the
/// paying scenario's steps are the flow's).
fn measured_names(flow: Option<&crate::steps::Flow>, scenarios: Option<&crate::scenarios::Scenarios>) -> Vec<String> {
    let mut names: Vec<String> = vec!["payment".into(), "attempt".into()];
    match scenarios {
        Some(s) => {
            for s in &s.list {
                names.push(s.name.clone());
                names.extend(s.steps.iter().cloned());
            }
        }
        None => names.extend(flow.iter().flat_map(|f| f.steps.iter().map(|s| s.name.clone()))),
    }
    names
}

/// The `--gate` expressions, each checked against what the run measures: `known`
/// latencies, and `scenarios` for `error_rate(NAME)`.
fn slo_gates(gates: &[String], known: &[String], scenarios: &[String]) -> Result<Vec<String>, LoadError> {
    gates
        .iter()
        .map(|text| {
            let slo = crate::slo::Slo::parse(text).map_err(|e| ConfigError::flag("--gate", e))?;
            if let Some(of) = slo.measures() {
                if !known.iter().any(|k| k == of) {
                    return Err(ConfigError::flag(
                        "--gate",
                        format!("the latency of one of {}, got '{of}' in '{text}'", known.join(", ")),
                    )
                    .into());
                }
            }
            if let Some(of) = slo.scenario() {
                if !scenarios.iter().any(|k| k == of) {
                    let known = match scenarios {
                        [] => "a --scenario's name (this run has none)".to_string(),
                        _ => format!("the name of one of the scenarios {}", scenarios.join(", ")),
                    };
                    return Err(ConfigError::flag("--gate", format!("{known}, got '{of}' in '{text}'")).into());
                }
            }
            Ok(slo.text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn goose(users: Option<usize>, rate: Option<&str>, time: Option<&str>) -> GooseConfiguration {
        // goose keeps some fields private: set the public ones on its default.
        let mut g = GooseConfiguration::default();
        g.users = users;
        g.increase_rate = rate.map(str::to_string);
        g.increase_time = time.map(str::to_string);
        g
    }

    #[test]
    fn users_start_in_the_first_second_unless_a_launch_pace_is_given() {
        let mut g = goose(Some(300), None, None);
        launch_all_at_once(&mut g);
        assert_eq!(g.increase_rate.as_deref(), Some("300"));

        let mut g = goose(Some(300), Some("5"), None);
        launch_all_at_once(&mut g);
        assert_eq!(g.increase_rate.as_deref(), Some("5"), "--increase-rate is kept");

        let mut g = goose(Some(300), None, Some("30s"));
        launch_all_at_once(&mut g);
        assert_eq!(g.increase_rate, None, "--increase-time is kept, and excludes a rate");

        let mut g = goose(None, None, None);
        launch_all_at_once(&mut g);
        assert_eq!(
            g.increase_rate, None,
            "goose picks the users (one per CPU) and their pace"
        );
    }
}
