//! `fauxpay load --rate` (the open model) through the built binary, against a provider in
//! this process over real sockets: the rate held exactly when the target keeps up, and a
//! slowed target that makes starts drop, with latency counted from the intended start.
//! Counts are asserted, not timings (a checkout cannot end sooner than its provider's
//! fixed latency, so the drops below are certain however slow the machine).

use fauxpay_testkit::provider as common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{with_profile, Harness};
use fauxpay_faults::{ms, Distribution, Profile, Rule};
use fauxpay_loadtests::arrival::{parse_rate, Arrivals, Schedule};
use serde_json::Value;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    report: Value,
}

async fn load(name: &str, args: &[&str]) -> Run {
    let given = args
        .iter()
        .position(|a| *a == "--out")
        .map(|i| PathBuf::from(args[i + 1]));
    let out = given
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("fauxpay-rate-{}-{name}", std::process::id())));
    let _ = std::fs::remove_dir_all(&out);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fauxpay"));
    cmd.arg("load")
        .args(args)
        .args(["--client-timeout", "2s", "--backoff", "10ms..20ms"]);
    if given.is_none() {
        cmd.args(["--out", out.to_str().unwrap()]);
    }
    let output = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let report = std::fs::read_to_string(PathBuf::from(&out).join("report.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        report,
    }
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn ms_of(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[tokio::test]
async fn the_rate_is_held_exactly_while_the_target_keeps_up() {
    let h = Harness::start(with_profile(fauxpay_faults::bundled::load("happy").unwrap())).await;
    let url = h.provider.url();
    let args = [
        "--target",
        &url,
        "--provider",
        &url,
        "--template",
        "stripe",
        "--run-id",
        "held",
        "--seed",
        "7",
        "--rate",
        "40/s",
        "--arrivals",
        "poisson",
        "--run-time",
        "2s",
        "--users",
        "40",
    ];
    let run = load("held", &args).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let r = &run.report;
    let open = &r["open"];
    // The seeded Poisson schedule, as the library computes it, is what ran.
    let expected = Schedule {
        rate: parse_rate("40/s").unwrap(),
        duration: Duration::from_secs(2),
        arrivals: Arrivals::Poisson,
        seed: 7,
    }
    .offsets()
    .count() as u64;
    assert!(expected > 40, "{expected}");
    assert_eq!(n(&open["scheduled"]), expected);
    assert_eq!(n(&open["started"]), expected, "{open}");
    assert_eq!(n(&open["dropped"]), 0);
    assert_eq!(n(&r["payments"]), expected);
    assert_eq!(n(&h.summary().await["charges"]), expected, "every start charged once");
    let seconds = open["per_second"].as_array().unwrap();
    assert_eq!(seconds.iter().map(|s| n(&s["started"])).sum::<u64>(), expected);
    assert_eq!(seconds.iter().map(|s| n(&s["completed"])).sum::<u64>(), expected);
    assert_eq!(ms_of(&open["achieved_per_sec"]), expected as f64 / 2.0);
    // The run counts from the schedule's start: launching the 40 users before it (goose
    // starts them at 40/s, a whole second) is not part of it.
    let secs = ms_of(&r["duration_secs"]);
    assert!((2.0..2.75).contains(&secs), "a 2 s schedule ran {secs} s");
    assert_eq!(open["arrivals"], "poisson");
    assert_eq!(n(&open["latency_from_intended"]["count"]), expected);
    assert!(run.stdout.contains("coordinated-omission-free"), "{}", run.stdout);
    assert!(run
        .stdout
        .contains(&format!("{expected} scheduled, {expected} started, 0 dropped")));
}

#[tokio::test]
async fn a_slowed_target_drops_starts_and_its_latency_counts_from_the_intended_start() {
    // Every request takes 200 ms, and every checkout's first attempt gets a 503: a
    // checkout takes at least 400 ms, so 2 users start at most 10 of 20 in 2 s.
    let profile = Profile::builder("slow")
        .seed(1)
        .latency(Distribution::fixed(ms(200)))
        .rule(Rule::error(503).first_attempts(1))
        .build()
        .unwrap();
    let h = Harness::start(with_profile(profile)).await;
    let url = h.provider.url();
    let args = [
        "--target",
        &url,
        "--provider",
        &url,
        "--template",
        "stripe",
        "--run-id",
        "slow",
        "--seed",
        "3",
        "--rate",
        "10/s",
        "--run-time",
        "2s",
        "--users",
        "2",
        "--max-dropped",
        "0",
    ];
    let run = load("slow", &args).await;
    assert_eq!(run.code, 1, "the dropped gate fails\n{}\n{}", run.stdout, run.stderr);
    let r = &run.report;
    let open = &r["open"];
    let (scheduled, started, dropped) = (n(&open["scheduled"]), n(&open["started"]), n(&open["dropped"]));
    assert_eq!(scheduled, 20);
    assert_eq!(started + dropped, scheduled);
    assert!((2..=10).contains(&started), "{open}");
    assert_eq!(n(&r["payments"]), started, "a dropped start sends nothing");
    assert_eq!(n(&h.summary().await["charges"]), started);
    // Only the dropped gate failed: every started checkout was charged once.
    let failed: Vec<&str> = r["gates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["passed"] == false)
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["dropped checkouts"]);
    assert!(
        run.stdout
            .contains(&format!("FAIL dropped checkouts = {dropped} (≤ 0)")),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("fell behind: second"), "{}", run.stdout);
    // Latency from the intended start covers the whole checkout (two attempts and a
    // backoff); a single attempt is one 200 ms answer.
    let attempt = &r["latency"]["attempt"];
    let payment = &r["latency"]["payment"];
    let intended = &open["latency_from_intended"];
    assert!(ms_of(&attempt["p50_ms"]) >= 200.0);
    assert!(ms_of(&intended["p50_ms"]) >= 400.0, "{intended}");
    assert!(
        ms_of(&intended["p50_ms"]) > ms_of(&attempt["p99_ms"]),
        "{intended} vs {attempt}"
    );
    for p in ["p50_ms", "p90_ms", "max_ms"] {
        assert!(
            ms_of(&intended[p]) >= ms_of(&payment[p]),
            "{p}: {intended} vs {payment}"
        );
    }
    let md = std::fs::read_to_string(
        std::env::temp_dir()
            .join(format!("fauxpay-rate-{}-slow", std::process::id()))
            .join("report.md"),
    )
    .unwrap();
    assert!(md.contains("| payment from its intended start |"), "{md}");
    assert!(
        md.contains(&format!("| 2 | {scheduled} | {started} | {dropped} |")),
        "{md}"
    );
}

#[tokio::test]
async fn the_open_model_refuses_what_it_cannot_honour() {
    let h = Harness::start(with_profile(fauxpay_faults::bundled::load("happy").unwrap())).await;
    let url = h.provider.url();
    let base = ["--target", url.as_str(), "--provider", url.as_str()];
    for (extra, says) in [
        (vec!["--rate", "10/s", "--users", "2"], "--run-time"),
        (vec!["--rate", "10/s", "--run-time", "1s"], "--users"),
        (
            vec![
                "--rate",
                "10/s",
                "--run-time",
                "1s",
                "--users",
                "2",
                "--iterations",
                "3",
            ],
            "--iterations",
        ),
        (vec!["--rate", "10", "--run-time", "1s", "--users", "2"], "--rate"),
        (vec!["--arrivals", "poisson"], "--rate"),
        (vec!["--max-dropped", "0"], "--rate"),
    ] {
        let args: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
        let run = load("refused", &args).await;
        assert_eq!(run.code, 2, "{extra:?}: {}", run.stderr);
        assert!(
            run.stderr.contains(says),
            "{extra:?} should name {says}: {}",
            run.stderr
        );
    }
}

/// Two generators sharing a rate, merged by directory as the Kubernetes merge Job does;
/// a closed-model report beside them is refused in one line.
#[tokio::test]
async fn generators_sharing_a_rate_merge_by_directory() {
    let h = Harness::start(with_profile(fauxpay_faults::bundled::load("happy").unwrap())).await;
    let url = h.provider.url();
    let dir = std::env::temp_dir().join(format!("fauxpay-rate-{}-gens", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for i in 0..2 {
        let (id, out) = (format!("gen-{i}"), dir.join(i.to_string()));
        let args = [
            "--target",
            &url,
            "--provider",
            &url,
            "--template",
            "stripe",
            "--run-id",
            &id,
            "--rate",
            "20/s",
            "--generators",
            "2",
            "--run-time",
            "1s",
            "--users",
            "10",
            "--out",
            out.to_str().unwrap(),
        ];
        let run = load(&id, &args).await;
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(n(&run.report["open"]["scheduled"]), 10, "half of 20/s for 1 s");
    }
    let merge = |extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fauxpay"));
        cmd.args(["report", "merge"]).arg(&dir).args(extra);
        cmd.output().unwrap()
    };
    let out = dir.join("merged");
    let merged = merge(&["--expect", "2", "--out", out.to_str().unwrap()]);
    assert_eq!(
        merged.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    let m: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(n(&m["open"]["scheduled"]), 20);
    assert_eq!(n(&m["open"]["started"]) + n(&m["open"]["dropped"]), 20);
    assert_eq!(n(&m["payments"]), n(&m["open"]["started"]));
    assert_eq!(n(&h.summary().await["charges"]), n(&m["payments"]), "the ledger agrees");
    assert_eq!(m["open"]["rate"], "20/s");
    assert_eq!(m["runs"].as_array().unwrap().len(), 2);
    // Again, with the merged folder now inside: it is skipped, not merged twice.
    let again = merge(&["--expect", "2", "--out", out.to_str().unwrap()]);
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // A closed-model run's report in the same folder cannot be added to them.
    let closed = dir.join("closed");
    let args = [
        "--target",
        &url,
        "--provider",
        &url,
        "--template",
        "stripe",
        "--run-id",
        "closed",
        "--users",
        "1",
        "--iterations",
        "1",
        "--out",
        closed.to_str().unwrap(),
    ];
    assert_eq!(load("closed", &args).await.code, 0);
    let refused = merge(&["--out", out.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("ran at a --rate (open model)") && err.contains("did not"),
        "{err}"
    );
}
