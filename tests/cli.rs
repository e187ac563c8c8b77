//! The `fauxpay` binary: start-up line, port 0, flags, exit codes, graceful shutdown.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

fn fauxpay() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fauxpay"))
}

/// Starts `fauxpay serve` on a free port and returns the child and its base URL, read
/// from the start-up line. The caller waits for the child.
#[allow(clippy::zombie_processes)]
fn spawn_serve(extra: &[&str]) -> (Child, String, BufReader<std::process::ChildStderr>) {
    let mut child = fauxpay()
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(extra)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("fauxpay starts");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "fauxpay exited before listening"
        );
        if let Some(rest) = line.split("listening on ").nth(1) {
            let url = rest.split_whitespace().next().unwrap().to_string();
            assert!(line.contains("idempotency=stripe"), "{line}");
            assert!(line.contains("correlate=metadata.order_id"), "{line}");
            return (child, url, stderr);
        }
    }
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
    ] {
        assert!(help.contains(flag), "{flag} missing from help");
    }
}
