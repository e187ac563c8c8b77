//! `fauxpay demo` runs end to end with a small count: naive and lock-only are caught
//! double-charging, idempotent is clean, and the exit code says so.

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
        ])
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
        let fulfilment = &report["fulfillment"];
        assert_eq!(
            fulfilment["probe"], "GET /orders/{{order_id}} → /fulfillments",
            "{merchant}"
        );
        if fulfilment["checked"] == true {
            let shipped_twice = report["anomalies"]["double_fulfillments"]["count"].as_u64().unwrap();
            assert_eq!(
                shipped_twice == 0,
                merchant == "idempotent",
                "{merchant}: {shipped_twice}"
            );
            assert_eq!(report["anomalies"]["missed_fulfillments"]["count"], 0, "{merchant}");
        }
    }
    std::fs::remove_dir_all(&out).ok();
}
