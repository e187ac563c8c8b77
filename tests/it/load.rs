//! `fauxpay load` through the built binary, against a provider in this process: double
//! charges found exactly, clean clients clean, gates and exit codes, the report files.

use fauxpay_testkit::provider as common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{with_profile, Harness};
use fauxpay_faults as faults;
use serde_json::Value;

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fauxpay-load-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

async fn provider(profile: &str) -> Harness {
    Harness::start(with_profile(faults::bundled::load(profile).unwrap())).await
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    out: PathBuf,
}

impl Run {
    fn report(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.out.join("report.json")).unwrap()).unwrap()
    }
}

/// Runs the binary off the async runtime's threads, so the in-process provider keeps serving.
async fn load(name: &str, args: &[&str]) -> Run {
    let out = out_dir(name);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fauxpay"));
    cmd.arg("load").args(args).args([
        "--out",
        out.to_str().unwrap(),
        "--increase-rate",
        "1000",
        "--client-timeout",
        "1s",
        "--backoff",
        "10ms..50ms",
    ]);
    let output = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        out,
    }
}

fn stripe_args<'a>(url: &'a str, mix: &'a str, run_id: &'a str) -> Vec<&'a str> {
    vec![
        "--target",
        url,
        "--provider",
        url,
        "--template",
        "stripe",
        "--mix",
        mix,
        "--run-id",
        run_id,
        "--seed",
        "7",
        "--users",
        "4",
        "--iterations",
        "15",
    ]
}

/// `args` without each of `flags` and its value.
fn without<'a>(mut args: Vec<&'a str>, flags: &[&str]) -> Vec<&'a str> {
    for flag in flags {
        let at = args.iter().position(|a| a == flag).expect("the flag is there");
        args.drain(at..at + 2);
    }
    args
}

#[tokio::test]
async fn retry_new_key_double_charges_exactly_as_the_ledger_says() {
    let h = provider("lost-responses").await;
    let url = h.provider.url();
    let run = load("newkey", &stripe_args(&url, "retry-new-key=1", "nk")).await;
    assert_eq!(
        run.code, 1,
        "a double charge fails the gate\n{}\n{}",
        run.stdout, run.stderr
    );
    let report = run.report();
    let summary = h.summary().await;
    let doubles = report["anomalies"]["double_charges"]["count"].as_u64().unwrap();
    assert!(doubles > 0, "lost-responses must make a new-key client double-charge");
    assert_eq!(doubles, summary["duplicate_group_count"].as_u64().unwrap());
    assert_eq!(report["anomalies"]["extra_charges"], summary["duplicate_charges"]);
    assert_eq!(report["payments"], 60);
    // The terminal, report.md and junit.xml tell the same numbers.
    assert!(
        run.stdout.contains(&format!("FAIL double charges = {doubles} (≤ 0)")),
        "{}",
        run.stdout
    );
    let md = std::fs::read_to_string(run.out.join("report.md")).unwrap();
    assert!(
        md.contains(&format!("| double charges | {doubles} | ≤ 0 | **FAIL** |")),
        "{md}"
    );
    assert!(
        md.contains(&format!("| {} | {} |", report["payments"], report["outcomes"]["ok"])),
        "{md}"
    );
    let example = &report["anomalies"]["double_charges"]["examples"][0]["story"];
    assert!(
        example.as_str().unwrap().contains("drop_response after_commit"),
        "{example}"
    );
    check_junit(&run.out, 1);
    assert!(run.out.join("journal.jsonl").exists());
    assert!(run.out.join("goose-report.html").exists());
}

#[tokio::test]
async fn retry_same_key_and_double_submit_never_double_charge() {
    let h = provider("lost-responses").await;
    let url = h.provider.url();
    let run = load("samekey", &stripe_args(&url, "retry-same-key=3,double-submit=1", "sk")).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report = run.report();
    assert_eq!(report["anomalies"]["double_charges"]["count"], 0);
    assert_eq!(h.summary().await["duplicate_group_count"], 0);
    assert_eq!(report["anomalies"]["lost"]["count"], 0);
    assert!(report["by_behaviour"]["double-submit"]["payments"].as_u64().unwrap() > 0);
    assert!(run.stdout.contains("every gate held"));
    check_junit(&run.out, 0);
}

/// The bundled `stripe` template completes 3-D Secure when the card asks for it (the
/// customer's step at the provider), so a 3-D Secure card is charged once and reported
/// `ok`, not a lost charge; a card that fails after 3-D Secure is a definite `fail` with
/// nothing charged, not a phantom.
#[tokio::test]
async fn stripe_completes_3ds_so_3ds_cards_are_neither_lost_nor_phantom() {
    let h = provider("happy").await;
    let url = h.provider.url();
    let mut args = stripe_args(&url, "retry-same-key=1", "tds");
    args.extend(["--payment-method", "pm_card_authenticationRequired"]);
    let run = load("3ds", &args).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report = run.report();
    assert_eq!(report["outcomes"]["ok"], 60, "{}", report["outcomes"]);
    assert_eq!(report["anomalies"]["lost"]["count"], 0);
    assert_eq!(h.summary().await["charges"], 60);
    // Each payment's journal line has its 3-D Secure step, answered 200.
    let journal = std::fs::read_to_string(run.out.join("journal.jsonl")).unwrap();
    let authenticated = journal
        .lines()
        .filter(|l| l.contains(r#""name":"authenticate","status":200"#))
        .count();
    assert_eq!(authenticated, 60, "{}", journal.lines().next().unwrap_or(""));

    let mut args = stripe_args(&url, "retry-same-key=1", "tdx");
    args.extend([
        "--payment-method",
        "pm_card_authenticationRequiredChargeDeclinedInsufficientFunds",
    ]);
    let run = load("3ds-declined", &args).await;
    let report = run.report();
    assert_eq!(report["outcomes"]["fail"], 60, "{}", report["outcomes"]);
    assert_eq!(report["anomalies"]["phantom"]["count"], 0);
    assert_eq!(h.summary().await["charges"], 60, "nothing more charged");
}

/// `--gate` expressions: a percentile of a step of the flow, of the payment, the error
/// rate. Each is judged against the run, is a test case in junit.xml and a row in
/// report.md, and decides the exit code; a step the template does not have is refused.
#[tokio::test]
async fn slo_gates_judge_steps_and_error_rates_and_decide_the_exit_code() {
    let h = provider("happy").await;
    let url = h.provider.url();
    let mut args = stripe_args(&url, "retry-same-key=1", "slo");
    args.extend([
        "--payment-method",
        "pm_card_authenticationRequired",
        "--gate",
        "p95(authenticate) < 30s",
        "--gate",
        "error_rate < 1%",
        "--gate",
        "p50(confirm) < 1us",
    ]);
    let run = load("slo", &args).await;
    assert_eq!(
        run.code, 1,
        "the impossible gate fails the run\n{}\n{}",
        run.stdout, run.stderr
    );
    let report = run.report();
    let gate = |name: &str| {
        report["gates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no gate {name} in {}", report["gates"]))
    };
    assert_eq!(gate("p95(authenticate) < 30s")["passed"], true);
    assert_eq!(gate("error_rate < 1%")["value"], "0.00%");
    assert_eq!(gate("error_rate < 1%")["passed"], true);
    assert_eq!(gate("p50(confirm) < 1us")["passed"], false);
    // Every step has its latency, its histogram kept for merging.
    for step in ["confirm", "authenticate"] {
        assert!(
            report["latency"]["steps"][step]["latency"]["count"].as_u64().unwrap() >= 60,
            "{step}"
        );
    }
    let md = std::fs::read_to_string(run.out.join("report.md")).unwrap();
    assert!(md.contains("| p50(confirm) < 1us |"), "{md}");
    let html = std::fs::read_to_string(run.out.join("report.html")).unwrap();
    assert!(
        html.contains("Latency by step") && html.contains(">authenticate</td>"),
        "report.html has the steps"
    );
    assert!(html.contains("p50(confirm) &lt; 1us"), "and the gate, escaped");
    assert!(md.contains("| step `authenticate` |"), "{md}");
    check_junit(&run.out, 1);
    let junit = std::fs::read_to_string(run.out.join("junit.xml")).unwrap();
    assert!(junit.contains("p95(authenticate) &lt; 30s"), "{junit}");

    let mut args = stripe_args(&url, "retry-same-key=1", "slo2");
    args.extend(["--gate", "p95(checkout) < 1s"]);
    let run = load("slo-unknown", &args).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("--gate: expected the latency of one of payment, attempt, confirm, authenticate, got 'checkout'"),
        "{}",
        run.stderr
    );
}

/// `--data stripe-cards`: one run mixes cards that pay, decline, and pass 3-D Secure then
/// pay or decline. An expected decline is a `fail` the reconciliation expects, not an
/// anomaly; a card expected to decline that was charged is one (its own gate).
#[tokio::test]
async fn a_feeder_of_test_cards_mixes_outcomes_and_flags_only_what_broke_expectations() {
    let h = provider("happy").await;
    let url = h.provider.url();
    let mut args = stripe_args(&url, "retry-same-key=1", "cards");
    args.extend(["--data", "stripe-cards"]);
    let run = load("cards", &args).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report = run.report();
    // 60 payments over 12 rows in order: 6 rows that pay, 6 that decline, 5 times each.
    assert_eq!(report["outcomes"]["ok"], 30, "{}", report["outcomes"]);
    assert_eq!(report["outcomes"]["fail"], 30);
    assert_eq!(report["anomalies"]["phantom"]["count"], 0);
    assert_eq!(report["anomalies"]["unexpected_charges"]["count"], 0);
    assert_eq!(report["anomalies"]["unexpected_declines"], 0);
    assert_eq!(h.summary().await["charges"], 30);
    assert!(
        run.stdout.contains("PASS charges of cards expected to decline = 0"),
        "{}",
        run.stdout
    );

    // A feeder whose expectations are wrong: the visa card "should decline" but is charged
    // (an anomaly, exit 1); the declined card "should pay" (counted, no anomaly). Its
    // amount column sets each payment's amount.
    let csv = std::env::temp_dir().join(format!("fauxpay-cards-{}.csv", std::process::id()));
    std::fs::write(
        &csv,
        "payment_method,amount,expect\npm_card_visa,1234,fail\npm_card_chargeDeclined,999,ok\n",
    )
    .unwrap();
    let mut args = stripe_args(&url, "retry-same-key=1", "wrong");
    args.extend(["--data", csv.to_str().unwrap()]);
    let run = load("cards-wrong", &args).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let report = run.report();
    assert_eq!(report["anomalies"]["unexpected_charges"]["count"], 30);
    assert_eq!(report["anomalies"]["unexpected_declines"], 30);
    assert!(
        run.stdout.contains("FAIL charges of cards expected to decline = 30"),
        "{}",
        run.stdout
    );
    let summary = h.summary().await;
    assert_eq!(summary["charges"], 60, "30 more, each of the row's amount: {summary}");

    // Each row once: 60 payments cannot take 12 rows once each, refused before the run.
    let mut args = stripe_args(&url, "retry-same-key=1", "once");
    args.extend(["--data", "stripe-cards", "--data-order", "once"]);
    let run = load("cards-once", &args).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("--data-order once: expected --users × --iterations of at most the feeder's 12 rows"),
        "{}",
        run.stderr
    );
    // A bad row is refused before the run, naming the file, the row and the column.
    std::fs::write(&csv, "payment_method,expect\npm_card_visa,maybe\n").unwrap();
    let mut args = stripe_args(&url, "retry-same-key=1", "bad");
    args.extend(["--data", csv.to_str().unwrap()]);
    let run = load("cards-bad", &args).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("row 2.expect: expected ok or fail, got 'maybe'"),
        "{}",
        run.stderr
    );
    let _ = std::fs::remove_file(&csv);
}

/// The same seed makes the same choices whatever the concurrency: under `--users 1` and
/// `--users 32`, each payment (by its number) has the same client behaviour, amount,
/// feeder row (drawn at random), faults at the provider, attempts, steps and outcome.
#[tokio::test]
async fn the_same_seed_makes_the_same_choices_under_1_and_32_users() {
    let template = std::env::temp_dir().join(format!("fauxpay-det-{}.toml", std::process::id()));
    // The bundled stripe flow, with a seeded think before the 3-D Secure step.
    let stripe = fauxpay_loadtests::template::STRIPE.replace(
        "if = { status = \"requires_action\" }",
        "if = { status = \"requires_action\" }\nthink = \"1ms..5ms\"",
    );
    assert!(stripe.contains("think"));
    std::fs::write(&template, stripe).unwrap();
    let mut journals = Vec::new();
    for users in ["1", "32"] {
        let h = provider("lost-responses").await;
        let url = h.provider.url();
        let args = [
            "--target",
            &url,
            "--provider",
            &url,
            "--template",
            template.to_str().unwrap(),
            "--mix",
            "retry-same-key=2,retry-new-key=1",
            "--data",
            "stripe-cards",
            "--data-order",
            "random",
            "--amount",
            "100..900",
            "--run-id",
            "det",
            "--seed",
            "11",
            "--users",
            users,
            "--iterations",
            if users == "1" { "64" } else { "2" },
        ];
        let run = load(&format!("det-{users}"), &args).await;
        assert!(run.code == 0 || run.code == 1, "{}\n{}", run.stdout, run.stderr);
        let text = std::fs::read_to_string(run.out.join("journal.jsonl")).unwrap();
        // Each line without its timings and the provider's random ids, by order id.
        let mut lines: Vec<String> = text
            .lines()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                for inner in ["attempt", "step"] {
                    if let Some(o) = v.get_mut(inner).and_then(Value::as_object_mut) {
                        o.remove("start_us");
                        o.remove("elapsed_us");
                        // The provider draws its ids at random.
                        o.remove("payment_id");
                    }
                }
                if let Some(o) = v.as_object_mut() {
                    o.remove("e2e_us");
                }
                v.to_string()
            })
            .collect();
        lines.sort();
        assert_eq!(lines.iter().filter(|l| l.contains("\"type\":\"outcome\"")).count(), 64);
        journals.push(lines);
    }
    assert_eq!(journals[0], journals[1], "the same choices, payment by payment");
    // And the choices varied: rows, behaviours and amounts differ between payments.
    assert!(journals[0].iter().any(|l| l.contains("\"expect\":\"fail\"")));
    assert!(journals[0].iter().any(|l| l.contains("retry-new-key")));
    let _ = std::fs::remove_file(&template);
}

/// A browse flow beside the checkout: an iteration runs one scenario, drawn by weight from
/// the seed (the same iterations pay under `--users 1` and `--users 6`); the browse runs
/// add load and latency, each scenario is reported apart and gated by name, and nothing
/// browsed is reconciled as a payment.
#[tokio::test]
async fn weighted_scenarios_run_a_browse_flow_beside_the_checkout_and_report_each() {
    let dir = out_dir("scenario-files");
    std::fs::create_dir_all(&dir).unwrap();
    let browse = dir.join("browse.toml");
    std::fs::write(
        &browse,
        r#"
name = "browse"

[[step]]
name = "catalogue"
path = "/v1/products?limit=3"
headers = { Authorization = "Bearer {{api_key}}" }

[[step]]
name = "recent"
path = "/v1/payment_intents?limit=2"
headers = { Authorization = "Bearer {{api_key}}" }
capture = { object = "/object" }

[outcome]
ok = { object = "list" }
"#,
    )
    .unwrap();
    let scenarios = format!("stripe=3,{}=1", browse.display());
    let mut paid = Vec::new();
    for users in ["1", "6"] {
        let h = provider("happy").await;
        let url = h.provider.url();
        let mut args = without(
            stripe_args(&url, "retry-same-key=1", "scen"),
            &["--template", "--users", "--iterations"],
        );
        let iterations = if users == "1" { "60" } else { "10" };
        args.extend([
            "--scenario",
            &scenarios,
            "--users",
            users,
            "--iterations",
            iterations,
            "--payment-method",
            "pm_card_authenticationRequired",
            "--gate",
            "p99(browse) < 30s",
            "--gate",
            "p95(stripe) < 30s",
            "--gate",
            "error_rate(browse) < 1%",
        ]);
        let run = load(&format!("scenario-{users}"), &args).await;
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let report = run.report();
        let sc = report["latency"]["scenarios"].as_array().unwrap().clone();
        let names: Vec<&str> = sc.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["stripe", "browse"]);
        let runs: Vec<u64> = sc.iter().map(|s| s["runs"].as_u64().unwrap()).collect();
        assert_eq!(runs[0] + runs[1], 60, "every iteration ran one scenario");
        assert!(runs[1] >= 5 && runs[1] <= 25, "about a quarter browsed: {runs:?}");
        assert_eq!(sc[1]["ok"], sc[1]["runs"], "every browse run went through");
        assert_eq!(sc[0]["ok"], sc[0]["runs"], "every 3-D Secure payment paid");
        assert_eq!(sc[1]["steps"], serde_json::json!(["catalogue", "recent"]));
        assert_eq!(sc[0]["pays"], true);
        // Only the payments are reconciled, exactly: no lost or phantom charges.
        assert_eq!(report["payments"].as_u64(), Some(runs[0]));
        assert_eq!(report["anomalies"]["lost"]["count"], 0);
        assert_eq!(report["anomalies"]["phantom"]["count"], 0);
        assert!(
            report["latency"]["steps"]["catalogue"]["latency"]["count"]
                .as_u64()
                .unwrap()
                == runs[1]
        );
        let html = std::fs::read_to_string(run.out.join("report.html")).unwrap();
        assert!(html.contains("<h2>Scenarios</h2>"), "report.html has the scenarios");
        assert!(
            html.contains(&format!("--scenario {scenarios} --mix")),
            "report.html's command reproduces the scenarios"
        );
        let md = std::fs::read_to_string(run.out.join("report.md")).unwrap();
        assert!(md.contains("| stripe (pays) | 3 |"), "{md}");
        assert!(md.contains("| p99(browse) < 30s |"), "{md}");
        assert!(run.stdout.contains("scenario    browse (weight 1)"), "{}", run.stdout);
        let journal = std::fs::read_to_string(run.out.join("journal.jsonl")).unwrap();
        let mut orders: Vec<String> = journal
            .lines()
            .filter(|l| l.contains("\"type\":\"outcome\""))
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["order_id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        orders.sort();
        paid.push(orders);
    }
    assert_eq!(paid[0], paid[1], "the same iterations paid under 1 and 6 users");

    // Mistakes, each one line, exit 2.
    let h = provider("happy").await;
    let url = h.provider.url();
    let browse_path = browse.display().to_string();
    let cases = [
        (format!("{browse_path}=1"), "one scenario that pays"),
        ("stripe=1,checkout-json=1".to_string(), "exactly one scenario that pays"),
        (
            "stripe=1,payment-element=1".to_string(),
            "step 'confirm' of payment-element is also a name in stripe",
        ),
        (
            format!("stripe=1,{browse_path}=1,{browse_path}=2"),
            "a template named twice",
        ),
        ("stripe=0".to_string(), "a whole weight"),
    ];
    let mut args = without(stripe_args(&url, "retry-same-key=1", "scen-bad"), &["--template"]);
    args.extend(["--scenario", &scenarios, "--gate", "error_rate(catalogue) < 1%"]);
    let run = load("scenario-bad-gate", &args).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("the name of one of the scenarios stripe, browse, got 'catalogue'"),
        "{}",
        run.stderr
    );
    for (spec, says) in cases {
        let mut args = without(stripe_args(&url, "retry-same-key=1", "scen-bad"), &["--template"]);
        args.extend(["--scenario", &spec]);
        let run = load("scenario-bad", &args).await;
        assert_eq!(run.code, 2, "{spec}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{spec}: {}", run.stderr);
    }
    // A browse flow alone as --template: it pays nothing, and says where it belongs.
    let mut args = without(stripe_args(&url, "retry-same-key=1", "scen-bad"), &["--template"]);
    args.extend(["--template", &browse_path]);
    let run = load("scenario-alone", &args).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("runs only as a --scenario"), "{}", run.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// junit.xml parses as JUnit XML, one test case per gate, `failures` of them failing.
fn check_junit(out: &Path, failures: usize) {
    let text = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("junit.xml is XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let suite = root.children().find(|n| n.has_tag_name("testsuite")).unwrap();
    let cases: Vec<_> = suite.children().filter(|n| n.has_tag_name("testcase")).collect();
    assert!(cases.len() >= 5);
    assert_eq!(suite.attribute("tests").unwrap(), cases.len().to_string());
    let failed = cases
        .iter()
        .filter(|c| c.children().any(|n| n.has_tag_name("failure")))
        .count();
    assert_eq!(failed, failures);
    assert_eq!(suite.attribute("failures").unwrap(), failures.to_string());
}

#[tokio::test]
async fn exit_codes_for_bad_configuration_and_unreachable_services() {
    let h = provider("happy").await;
    let url = h.provider.url();
    let bad_mix = load(
        "badmix",
        &["--target", &url, "--provider", &url, "--mix", "retry-sometimes=1"],
    )
    .await;
    assert_eq!(bad_mix.code, 2, "{}", bad_mix.stderr);
    assert!(bad_mix.stderr.contains("--mix"), "{}", bad_mix.stderr);
    let bad_template = load("badtpl", &["--target", &url, "--provider", &url, "--template", "nope"]).await;
    assert_eq!(bad_template.code, 2);
    let bad_flag = load(
        "badflag",
        &["--target", &url, "--provider", &url, "--backoff", "5s..1s"],
    )
    .await;
    assert_eq!(bad_flag.code, 2);
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let nowhere = format!("http://{closed}");
    let down = load(
        "down",
        &["--target", &url, "--provider", &nowhere, "--wait-ready", "300ms"],
    )
    .await;
    assert_eq!(down.code, 3, "{}", down.stderr);
    assert!(down.stderr.contains("provider is unreachable"), "{}", down.stderr);
    assert!(
        down.stderr.contains("waiting up to 300ms"),
        "one line says it waits: {}",
        down.stderr
    );
    let no_target = load(
        "notarget",
        &["--target", &nowhere, "--provider", &url, "--wait-ready", "0s"],
    )
    .await;
    assert_eq!(no_target.code, 3);
    assert!(!no_target.stderr.contains("waiting"), "{}", no_target.stderr);
}

/// Started with `&` a moment before its provider (docker compose, a CI step, a pasted
/// block), `fauxpay load` waits for it: the provider comes up only once load has said it
/// waits, and the run then goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_waits_for_a_provider_that_comes_up_late() {
    use std::io::BufRead;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let out = out_dir("late");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fauxpay"))
        .args([
            "load",
            "--target",
            &url,
            "--provider",
            &url,
            "--template",
            "stripe",
            "--users",
            "2",
        ])
        .args([
            "--iterations",
            "2",
            "--increase-rate",
            "1000",
            "--wait-ready",
            "20s",
            "--out",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its stderr, read to the end (so it never blocks on a full pipe); the line that says
    // it waits is the signal to start the provider.
    let stderr = child.stderr.take().unwrap();
    let (said, waiting) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("waiting up to 20s") {
                let _ = said.send(());
            }
        }
    });
    let waited = tokio::task::spawn_blocking(move || waiting.recv_timeout(std::time::Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(waited.is_ok(), "load said that it waits");
    let h = Harness::start_on(
        fauxpay_provider::Config::default(),
        format!("127.0.0.1:{port}").parse().unwrap(),
    )
    .await;
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(h.summary().await["charges"], 4);
}

#[tokio::test]
async fn gates_decide_the_exit_code() {
    let h = provider("happy").await;
    let url = h.provider.url();
    // Declines are definite failures: no anomaly, so the gates hold...
    let mut args = stripe_args(&url, "retry-same-key=1", "gate");
    args.extend(["--payment-method", "pm_card_chargeDeclined"]);
    let declined = load("declined", &args).await;
    assert_eq!(declined.code, 0, "{}", declined.stdout);
    assert_eq!(declined.report()["outcomes"]["fail"], 60);
    // ...but an impossible latency gate fails.
    let mut args = stripe_args(&url, "retry-same-key=1", "gate2");
    args.extend(["--max-p99", "1us"]);
    let slow = load("p99", &args).await;
    assert_eq!(slow.code, 1);
    assert!(slow.stdout.contains("FAIL payment p99"), "{}", slow.stdout);
}

#[tokio::test]
async fn merged_reports_add_up_to_the_ledger() {
    let h = provider("lost-responses").await;
    let url = h.provider.url();
    let a = load("merge-a", &stripe_args(&url, "retry-new-key=1", "ma")).await;
    let b = load("merge-b", &stripe_args(&url, "retry-new-key=1,retry-same-key=1", "mb")).await;
    let out = out_dir("merged");
    let merged = Command::new(env!("CARGO_BIN_EXE_fauxpay"))
        .args(["report", "merge"])
        .arg(a.out.join("report.json"))
        .arg(b.out.join("report.json"))
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let m: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let (ra, rb) = (a.report(), b.report());
    let sum = |path: &str| ra.pointer(path).unwrap().as_u64().unwrap() + rb.pointer(path).unwrap().as_u64().unwrap();
    assert_eq!(m["payments"].as_u64().unwrap(), sum("/payments"));
    assert_eq!(m["attempts"].as_u64().unwrap(), sum("/attempts"));
    assert_eq!(
        m["anomalies"]["double_charges"]["count"].as_u64().unwrap(),
        sum("/anomalies/double_charges/count")
    );
    assert_eq!(m["latency"]["attempt"]["count"].as_u64().unwrap(), sum("/attempts"));
    // The two generators' double charges are exactly the provider's duplicate groups.
    assert_eq!(
        m["anomalies"]["double_charges"]["count"],
        h.summary().await["duplicate_group_count"]
    );
    assert_eq!(merged.status.code(), Some(1), "the merged report gates too");
    let bad = Command::new(env!("CARGO_BIN_EXE_fauxpay"))
        .args(["report", "merge", "/nonexistent.json", "/also-not.json"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// A target that answers 200 with an endless body: every answer is cut at 1 MiB, counted
/// in the report and the summary, and the load generator stays small (it used to read
/// until it was OOM-killed, with no report).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_answer_is_cut_and_counted_and_costs_little() {
    let h = provider("happy").await;
    let target = fauxpay_testkit::fakes::endless_server().await;
    let url = h.provider.url();
    let out = out_dir("endless");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fauxpay"));
    cmd.args([
        "load",
        "--target",
        &target,
        "--provider",
        &url,
        "--template",
        "checkout-json",
        "--mix",
        "retry-same-key=1",
        "--users",
        "2",
        "--iterations",
        "3",
        "--increase-rate",
        "1000",
        "--client-timeout",
        "5s",
        "--backoff",
        "10ms..20ms",
        "--out",
    ])
    .arg(&out)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    // The process's peak resident memory, as the kernel keeps it, sampled until it exits.
    let peak = std::thread::spawn(move || {
        let mut peak = 0u64;
        while let Some(hwm) = fauxpay_testkit::fakes::memory(Some(pid), "VmHWM") {
            peak = peak.max(hwm);
            // A sampling interval (VmHWM only grows), not a wait for an event.
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        peak
    });
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let peak = peak.join().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let attempts = report["attempts"].as_u64().unwrap();
    assert!(attempts >= 6, "{report}");
    assert_eq!(report["answers_cut"].as_u64(), Some(attempts), "{report}");
    assert!(
        stdout.contains("answers longer than 1048576 bytes were not read"),
        "{stdout}"
    );
    assert!(peak < 256 << 20, "the load generator's peak RSS was {peak} bytes");
}

/// The ledger cannot be read at the end of a run (here: the provider wants an admin token
/// the run was not given). The run is still reported, its anomalies "unknown", every
/// anomaly gate failed as such, and it exits 4 (it used to exit 2, the bad-usage code,
/// with no report). `fauxpay report reconcile` judges the saved journal later, with the
/// token, and finds exactly the ledger's double charges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_ledger_cannot_be_read_is_reported_unknown_and_reconciled_later() {
    let h = Harness::start(fauxpay_provider::Config {
        admin_token: Some("s3cret".into()),
        ..with_profile(faults::bundled::load("lost-responses").unwrap())
    })
    .await;
    let url = h.provider.url();
    let run = load("unread", &stripe_args(&url, "retry-new-key=1", "unread")).await;
    assert_eq!(run.code, 4, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("UNKNOWN") && run.stdout.contains("could not be read"),
        "{}",
        run.stdout
    );
    let report = run.report();
    assert!(report["ledger_unread"].as_str().unwrap().contains("401"), "{report}");
    assert!(report["gates"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g["value"] == "unknown" && g["passed"] == false));
    assert!(std::fs::read_to_string(run.out.join("report.md"))
        .unwrap()
        .contains("Anomalies unknown"));

    let out = Command::new(env!("CARGO_BIN_EXE_fauxpay"))
        .args(["report", "reconcile"])
        .arg(&run.out)
        .args(["--admin-token", "s3cret"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = run.report();
    assert!(report.get("ledger_unread").is_none(), "{report}");
    let found = report["anomalies"]["double_charges"]["count"].as_u64().unwrap();
    let summary = h
        .client
        .get(h.url("/__fauxpay/summary"))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let groups = summary["duplicate_groups"].as_array().unwrap();
    let in_ledger = groups
        .iter()
        .filter(|g| g["correlation_id"].as_str().unwrap().starts_with("unread-"))
        .count() as u64;
    assert!(
        in_ledger > 0,
        "lost answers and new keys double-charged some orders: {summary}"
    );
    assert_eq!(found, in_ledger, "{stdout}");
    assert_eq!(out.status.code(), Some(1), "a double-charge gate failed: {stdout}");
}

/// The cap itself, on an answer that never ends: `read_capped` gives up at the cap, and
/// `json_capped` says so in words.
#[tokio::test]
async fn an_endless_answer_is_cut_at_the_cap() {
    use fauxpay_loadtests::body::{json_capped, read_capped};
    let url = fauxpay_testkit::fakes::endless_server().await;
    let resp = reqwest::get(&url).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(read_capped(resp, 1 << 20).await.unwrap(), None);
    let resp = reqwest::get(&url).await.unwrap();
    let e = json_capped::<Value>(resp, 4096).await.unwrap_err();
    assert_eq!(e.to_string(), "the answer is longer than 4096 bytes; not read");
}

/// Every template in docs/load.md (its ```toml blocks) is one `fauxpay load` accepts, so
/// the walk-through a QA team copies works as written.
#[test]
fn the_templates_in_the_docs_parse() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/load.md")).unwrap();
    let blocks: Vec<&str> = text
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert!(blocks.len() >= 3, "{} toml blocks", blocks.len());
    for block in blocks {
        let plan =
            fauxpay_loadtests::plan::Plan::parse("docs/load.md", block).unwrap_or_else(|e| panic!("{e}\n{block}"));
        assert_eq!(plan.flow.is_some(), block.contains("[[step]]"), "{block}");
    }
}

/// `fauxpay load` at a rate for long enough to be interrupted, sent `signals` (`"INT"`,
/// `"TERM"`) one after another once its users have started (its journal holds an
/// attempt); its output, and its reports folder.
async fn interrupted(url: &str, name: &str, signals: &[&str]) -> (std::process::Output, PathBuf) {
    let (url, out) = (url.to_string(), out_dir(name));
    let signals: Vec<String> = signals.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fauxpay"))
            .args(["load", "--target", &url, "--provider", &url, "--template", "stripe"])
            .args(["--rate", "100/s", "--run-time", "60s", "--users", "8", "--out"])
            .arg(&out)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let journal = out.join("journal.jsonl");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::fs::metadata(&journal).map_or(true, |m| m.len() == 0) {
            if std::time::Instant::now() > until {
                let _ = child.kill();
                panic!("no attempt in {}", journal.display());
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Each signal once the last one's line is out: two signals sent before the first is
        // taken would be one.
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut said = String::new();
        for signal in &signals {
            let status = Command::new("kill")
                .args([&format!("-{signal}"), &child.id().to_string()])
                .status()
                .unwrap();
            assert!(status.success());
            let named = named(signal);
            let mut line = String::new();
            while std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0 && !line.contains(named) {
                said.push_str(&line);
                line.clear();
            }
            said.push_str(&line);
        }
        std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();
        let mut output = child.wait_with_output().unwrap();
        output.stderr = said.into_bytes();
        (output, out)
    })
    .await
    .unwrap()
}

/// How `fauxpay load`'s lines and reports name `kill`'s signal (`"INT"` or `"TERM"`).
fn named(signal: &str) -> &'static str {
    if signal == "INT" {
        "Ctrl-C"
    } else {
        "SIGTERM"
    }
}

/// One `signal` (`"INT"` or `"TERM"`) stops the users, and the ledger is reconciled and
/// every report written, saying so; the run exits with `code`. Its standard output and
/// reports folder.
async fn stopped_once(url: &str, dir: &str, signal: &str, code: i32) -> (String, PathBuf) {
    let named = named(signal);
    let (stopped, out) = interrupted(url, dir, &[signal]).await;
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    let stdout = String::from_utf8_lossy(&stopped.stdout).into_owned();
    assert_eq!(stopped.status.code(), Some(code), "{stderr}\n{stdout}");
    assert!(stderr.contains(&format!("{named}: stopping")), "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert!(report["payments"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["runs"][0]["stopped_by"], named, "{report}");
    assert!(
        stdout.contains(&format!("stopped     early: {named} stopped run")),
        "{stdout}"
    );
    (stdout, out)
}

/// Two `signal`s: the second quits at once with `code`, saying the reports are
/// incomplete, and none is written. The reports folder.
async fn quit_twice(url: &str, dir: &str, signal: &str, code: i32) -> PathBuf {
    let named = named(signal);
    let (quit, out) = interrupted(url, dir, &[signal, signal]).await;
    let stderr = String::from_utf8_lossy(&quit.stderr);
    assert_eq!(quit.status.code(), Some(code), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{named} again: quitting now; the reports in {} are incomplete",
            out.display()
        )),
        "{stderr}"
    );
    assert!(!out.join("report.json").exists());
    out
}

#[tokio::test]
async fn ctrl_c_stops_the_run_and_reconciles_and_a_second_quits_saying_so() {
    let h = provider("happy").await;
    let url = h.provider.url();

    // Once: the users stop, the ledger is reconciled, every report is written, and the
    // run exits with its gates' code.
    let (stdout, _) = stopped_once(&url, "ctrl-c-once", "INT", 0).await;
    assert!(stdout.contains("  result      every gate held\n"), "{stdout}");

    // Twice: it quits at once with 130 and says the reports are incomplete.
    let out = quit_twice(&url, "ctrl-c-twice", "INT", 130).await;
    // The journal is whole JSON lines, a drain (20 ms) behind (`fauxpay report reconcile`
    // needs the report.json a finished run writes; the lines are for a person or a tool).
    let journal = std::fs::read_to_string(out.join("journal.jsonl")).unwrap();
    assert!(journal.ends_with('\n'), "{journal}");
    let outcomes = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|v| v["type"] == "outcome")
        .count();
    assert!(outcomes > 0, "{journal}");
}

/// SIGTERM, as `docker stop`, Kubernetes and `timeout` send it, stops a run as Ctrl-C
/// does (the reports written, each saying so) but exits 143 (a run cut short is not a
/// pass), and a second SIGTERM while the users run quits with 143 saying the reports are
/// incomplete. Before, the process died at once with no report.
#[tokio::test]
async fn sigterm_stops_the_run_reports_it_and_exits_143() {
    let h = provider("happy").await;
    let url = h.provider.url();

    // Once: whole reports that say SIGTERM stopped the run, and 143 although every gate
    // held over the part that ran (an evicted or timed-out run is not a pass).
    let (stdout, out) = stopped_once(&url, "sigterm-once", "TERM", 143).await;
    assert!(
        stdout.contains("every gate held over the part that ran, but SIGTERM cut the run short (exit 143)"),
        "{stdout}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("cut short by SIGTERM") && md.contains("Stopped early: SIGTERM"),
        "{md}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("cut short by SIGTERM"), "report.html");
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains("<failure message=\"cut short by SIGTERM\">"), "{junit}");

    quit_twice(&url, "sigterm-twice", "TERM", 143).await;
}

/// SIGTERM while `fauxpay load` still waits for its target (`--wait-ready`) quits at once
/// with 143, saying so: as its default did, but also where fauxpay is a container's PID 1,
/// which ignores a signal it has no handler for.
#[tokio::test]
async fn sigterm_before_the_run_starts_quits_at_once() {
    let out = out_dir("sigterm-waiting");
    let output = tokio::task::spawn_blocking(move || {
        // Nothing answers on port 1: the run waits for its target.
        let mut child = Command::new(env!("CARGO_BIN_EXE_fauxpay"))
            .args([
                "load",
                "--target",
                "http://127.0.0.1:1",
                "--provider",
                "http://127.0.0.1:1",
            ])
            .args(["--wait-ready", "60s", "--out"])
            .arg(&out)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut said = String::new();
        while std::io::BufRead::read_line(&mut stderr, &mut said).unwrap() > 0 && !said.contains("waiting up to") {}
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();
        (child.wait().unwrap(), said)
    })
    .await
    .unwrap();
    let (status, stderr) = output;
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(
        stderr.contains("fauxpay load: SIGTERM: quitting before the run started"),
        "{stderr}"
    );
}
