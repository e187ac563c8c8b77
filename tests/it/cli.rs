//! The `fauxpay` binary: start-up line, port 0, flags, exit codes, graceful shutdown.

use std::io::BufReader;
use std::process::{Child, Command};

fn fauxpay() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fauxpay"))
}

/// Starts `fauxpay serve` on a free port and returns the child and its base URL, read
/// from the start-up line. The caller waits for the child.
fn spawn_serve(extra: &[&str]) -> (Child, String, BufReader<std::process::ChildStderr>) {
    let (child, url, stderr, _) = spawn_serve_line(extra);
    (child, url, stderr)
}

/// [`spawn_serve`], with the start-up line.
fn spawn_serve_line(extra: &[&str]) -> (Child, String, BufReader<std::process::ChildStderr>, String) {
    let (child, url, stderr, printed) =
        crate::support::spawn_listening(["serve", "--addr", "127.0.0.1:0"].iter().chain(extra));
    let line = printed.lines().last().unwrap_or_default().to_string();
    assert!(line.contains("idempotency=stripe"), "{line}");
    assert!(line.contains("correlate=metadata.order_id"), "{line}");
    (child, url, stderr, line)
}

fn terminate(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn serve_reports_its_port_answers_and_stops_on_sigterm() {
    let (mut child, url, mut stderr) = spawn_serve(&["--duplicates", "reject", "--key-ttl", "10m"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let status = rt.block_on(async {
        reqwest::Client::new()
            .post(format!("{url}/v1/payment_intents"))
            .bearer_auth("sk_test_cli")
            .form(&[
                ("amount", "1000"),
                ("currency", "usd"),
                ("confirm", "true"),
                ("payment_method", "pm_card_visa"),
            ])
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, 200);
    terminate(&child);
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(rest.contains("stopped"), "{rest}");
}

#[test]
fn bad_flags_exit_2_with_a_clear_message() {
    for (args, needle) in [
        (&["serve", "--key-ttl", "soon"][..], "key-ttl"),
        (&["serve", "--idempotency", "maybe"][..], "idempotency"),
        (&["serve", "--correlate", "metadata..x"][..], "correlation path"),
        (&["serve", "--addr", "nowhere"][..], "addr"),
        (
            &["serve", "--webhook", "ftp://example.com/hook"][..],
            "--webhook ftp://example.com/hook",
        ),
        (&["serve", "--webhook-retries", "1s,soon"][..], "webhook-retries"),
        (&["serve", "--event-ttl", "0s"][..], "event-ttl"),
        // goose's thresholds would stop a run before reconciliation: refused, before any
        // target is reached.
        (
            &[
                "load",
                "--target",
                "http://127.0.0.1:9",
                "--provider",
                "http://127.0.0.1:9",
                "--threshold",
                "p95<1ms",
            ][..],
            "--threshold: expected no goose threshold",
        ),
    ] {
        let out = fauxpay().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn help_explains_every_serve_flag() {
    let out = fauxpay().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--addr",
        "--idempotency",
        "--key-ttl",
        "--correlate",
        "--duplicates",
        "--api-key",
        "--admin-token",
        "--webhook",
        "--webhook-secret",
        "--webhook-retries",
        "--webhook-timeout",
        "--event-ttl",
    ] {
        assert!(help.contains(flag), "{flag} missing from help");
    }
}

#[test]
fn profiles_list_names_every_bundled_profile() {
    let out = fauxpay().args(["profiles", "list"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "happy",
        "flaky-network",
        "lost-responses",
        "slow-provider",
        "ambiguous-errors",
        "outage-window",
        "rate-limited",
        "declines",
        "key-expiry",
        "chaos",
        "duplicate-webhooks",
    ] {
        assert!(text.lines().any(|l| l.starts_with(name)), "{name} missing:\n{text}");
    }
}

#[test]
fn every_bundled_profile_checks_and_serves() {
    let files: Vec<String> = std::fs::read_dir("fault-profiles")
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".toml"))
        .collect();
    assert!(files.len() >= 10);
    let out = fauxpay().args(["profiles", "check"]).args(&files).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for file in &files {
        let name = file.trim_start_matches("fault-profiles/").trim_end_matches(".toml");
        let (mut child, _url, _stderr) = spawn_serve(&["--profile", name]);
        terminate(&child);
        assert!(child.wait().unwrap().success(), "{name}");
    }
}

#[test]
fn bad_profiles_give_one_line_per_mistake_and_exit_2() {
    let dir = std::env::temp_dir().join(format!("fauxpay-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "name = \"x\"\ndescription = \"d\"\nseed = 1\n[[rules]]\nkind = \"rate_limit\"\nprobabilty = 0.5\nwhen = \"after_commit\"\n[[rules]]\nkind = \"drop_response\"\nprobability = 1.5\n[[rules]]\nkind = \"hang\"\nhang = \"-3s\"\n",
    )
    .unwrap();
    let path = bad.display().to_string();
    let expected = [
        format!("{path}:6: rules[0].probabilty: unknown field"),
        format!("{path}:7: rules[0].when: kind \"rate_limit\" takes no `when`"),
        format!("{path}:10: rules[1].probability: expected a number between 0 and 1, got 1.5"),
        format!("{path}:13: rules[2].hang:"),
    ];
    let check = fauxpay().args(["profiles", "check", &path]).output().unwrap();
    assert_eq!(check.status.code(), Some(2));
    let err = String::from_utf8_lossy(&check.stderr);
    for line in &expected {
        assert!(
            err.lines().any(|l| l.starts_with(line.as_str())),
            "missing {line:?} in:\n{err}"
        );
    }
    let serve = fauxpay()
        .args(["serve", "--addr", "127.0.0.1:0", "--profile", &path])
        .output()
        .unwrap();
    assert_eq!(serve.status.code(), Some(2), "serve refuses a bad profile");
    let err = String::from_utf8_lossy(&serve.stderr);
    assert!(err.contains(&expected[2]), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn webhooks_print_their_generated_secret_and_shutdown_says_what_was_pending() {
    // A port nobody listens on: every delivery fails and waits for its retry.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hook = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    let (mut child, url, mut stderr, line) = spawn_serve_line(&["--webhook", &hook, "--webhook-retries", "10m"]);
    assert!(line.contains(&format!("webhooks={hook}")), "{line}");
    let secret = line
        .split("webhook_secret=")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap_or_default();
    assert!(secret.starts_with("whsec_") && secret.len() == 38, "{line}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let status = rt.block_on(async {
        reqwest::Client::new()
            .post(format!("{url}/v1/customers"))
            .bearer_auth("sk_test_cli")
            .form(&[("name", "pending")])
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, 200);
    terminate(&child);
    assert!(child.wait().unwrap().success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(rest.contains("webhook deliveries pending"), "{rest}");
}
