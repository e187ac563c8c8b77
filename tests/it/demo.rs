//! `fauxpay demo` runs end to end with a small count: naive and lock-only are caught
//! double-charging, idempotent is clean, and the exit code says so; its standard output
//! reads as a story (a header, the table, where the reports are: no log line, no ERROR,
//! nothing goose printed), and each merchant's `report.html` is written.

use std::process::Command;

#[test]
fn the_demo_catches_the_buggy_merchants_and_passes_the_idempotent_one() {
    let out = std::env::temp_dir().join(format!("fauxpay-demo-test-{}", std::process::id()));
    let run = Command::new(env!("CARGO_BIN_EXE_fauxpay"))
        .args([
            "demo",
            "--profile",
            "lost-responses",
            "--users",
            "4",
            "--payments",
            "20",
            "--out",
            out.to_str().unwrap(),
            "--keep-serving",
            "no",
        ])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let row = |name: &str| {
        stdout
            .lines()
            .rev()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row:\n{stdout}"))
            .to_string()
    };
    assert!(row("naive").contains("double-charges, as expected"), "{stdout}");
    assert!(row("lock-only").contains("double-charges, as expected"), "{stdout}");
    assert!(row("idempotent").contains("clean, as it must be"), "{stdout}");
    assert!(row("merchant").contains("double fulfilments"), "{stdout}");
    for merchant in ["naive", "lock-only", "idempotent"] {
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(merchant).join("report.json")).unwrap()).unwrap();
        assert_eq!(report["payments"], 80, "{merchant}");
        let doubles = report["anomalies"]["double_charges"]["count"].as_u64().unwrap();
        assert_eq!(
            doubles == 0,
            merchant == "idempotent",
            "{merchant}: {doubles} double charges"
        );
        // Every merchant is probed; once the provider delivers webhooks to them, a double
        // charge is a double fulfilment for naive and lock-only, and idempotent ships once.
        let fulfillment = &report["fulfillment"];
        assert_eq!(
            fulfillment["probe"], "GET /orders/{{order_id}} → /fulfillments",
            "{merchant}"
        );
        if fulfillment["checked"] == true {
            let shipped_twice = report["anomalies"]["double_fulfillments"]["count"].as_u64().unwrap();
            assert_eq!(
                shipped_twice == 0,
                merchant == "idempotent",
                "{merchant}: {shipped_twice}"
            );
            assert_eq!(report["anomalies"]["missed_fulfillments"]["count"], 0, "{merchant}");
        }
    }
    assert!(
        stdout.starts_with("fauxpay demo: the fake provider under the `lost-responses` fault profile"),
        "{stdout}"
    );
    assert!(stdout.contains("Dashboard: http://127.0.0.1:"), "{stdout}");
    assert!(
        stdout.contains("merchant      payments  double charges"),
        "the table:\n{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "naive        {}",
            out.join("naive").join("report.html").display()
        )),
        "{stdout}"
    );
    assert!(
        !stdout.contains("ERROR") && !stdout.contains(" INFO ") && !stdout.contains(" WARN "),
        "no log lines:\n{stdout}"
    );
    assert!(
        !stdout.contains("users launched"),
        "goose's prints stay out of it:\n{stdout}"
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !stderr.contains("ERROR"),
        "no ERROR (goose's controllers are off):\n{stderr}"
    );
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("naive ")).count(),
        1,
        "one progress line per run:\n{stderr}"
    );
    let log = std::fs::read_to_string(out.join("demo.log")).unwrap();
    assert!(
        log.contains("fauxpay_merchant"),
        "the merchants' logs are in demo.log:\n{log}"
    );
    for merchant in ["naive", "lock-only", "idempotent"] {
        let html = std::fs::read_to_string(out.join(merchant).join("report.html")).unwrap();
        assert!(html.contains("data-chart=\"throughput\""), "{merchant}");
    }
    std::fs::remove_dir_all(&out).ok();
}

/// `fauxpay demo --flow checkout-session` and `--flow payment-element`: customers pay in
/// the browser with Stripe's test cards (on the Checkout page and back to the success
/// page; or confirming the Payment Element's intent). Nothing is charged twice (the
/// browser pays once), but naive and lock-only ship every paid order twice (a Checkout
/// Session's `checkout.session.completed` and its success page; the Payment Element's
/// `payment_intent.succeeded` delivered twice under its default `duplicate-webhooks`
/// profile), and idempotent once: the kit catches them, exit 0.
#[test]
fn the_browser_flow_demos_catch_double_fulfilments() {
    for (flow, profile) in [("checkout-session", Some("happy")), ("payment-element", None)] {
        let out = std::env::temp_dir().join(format!("fauxpay-demo-{flow}-{}", std::process::id()));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fauxpay"));
        cmd.args(["demo", "--flow", flow])
            .args(["--users", "3", "--payments", "6", "--keep-serving", "no", "--out"])
            .arg(&out)
            .env_remove("RUST_LOG");
        if let Some(p) = profile {
            cmd.args(["--profile", p]);
        }
        let run = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert_eq!(
            run.status.code(),
            Some(0),
            "{flow}: {stdout}\n{}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(stdout.contains(&format!("({flow} flow)")), "{stdout}");
        if profile.is_none() {
            assert!(stdout.contains("`duplicate-webhooks` fault profile"), "{stdout}");
        }
        for merchant in ["naive", "lock-only", "idempotent"] {
            let report: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(out.join(merchant).join("report.json")).unwrap())
                    .unwrap();
            let a = &report["anomalies"];
            assert_eq!(a["double_charges"]["count"], 0, "{flow} {merchant}");
            assert_eq!(a["lost"]["count"], 0, "{flow} {merchant}");
            assert_eq!(report["fulfillment"]["checked"], true, "{flow} {merchant}");
            let paid = report["outcomes"]["ok"].as_u64().unwrap();
            assert!(
                paid >= 6,
                "{flow} {merchant}: Stripe's test cards pay about half: {paid}"
            );
            let twice = a["double_fulfillments"]["count"].as_u64().unwrap();
            let expected = if merchant == "idempotent" { 0 } else { paid };
            assert_eq!(twice, expected, "{flow} {merchant}\n{stdout}");
            let row = stdout.lines().rev().find(|l| l.starts_with(merchant)).unwrap();
            let verdict = if merchant == "idempotent" {
                "clean, as it must be"
            } else {
                "fulfils twice, as expected"
            };
            assert!(row.contains(verdict), "{row}");
        }
        std::fs::remove_dir_all(&out).ok();
    }
}
