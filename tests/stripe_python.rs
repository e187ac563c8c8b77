//! Stripe's official Python SDK (`stripe` on PyPI, pinned to [`SDK`]) runs a service's
//! payment flows against fauxpay with nothing changed but its base address
//! (`tests/stripe_python/flows.py`): typed objects, card errors, parameter errors,
//! idempotent replays and refused key reuse, refunds, captures, paging and search, a
//! saved card charged off-session, 3-D Secure, events, webhooks verified by the SDK's own
//! `Webhook.construct_event`, and the SDK's automatic retries against an answer lost
//! after the charge.
//!
//! The SDK goes into a virtualenv under `target/tmp` on first use (from PyPI, a few
//! seconds), or `FAUXPAY_STRIPE_PYTHON` names a Python that imports it. Without Python
//! or PyPI the tests say so on stderr and pass, except under `CI`, where they fail.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{with_profile, Harness};
use fauxpay::faults::{Profile, Rule};
use serde_json::Value;

/// The SDK release the flows are written against.
const SDK: &str = "16.1.0";

/// A Python that imports the pinned SDK, installed on first use; `None` (said on
/// stderr) when there is none and `CI` is unset.
fn python() -> Option<&'static Path> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(install) {
        Ok(python) => Some(python),
        Err(why) if std::env::var_os("CI").is_some() => panic!("Stripe's Python SDK: {why}"),
        Err(why) => {
            eprintln!("\n*** SKIPPED the official Python SDK tests: {why} ***\n");
            None
        }
    }
}

fn install() -> Result<PathBuf, String> {
    if let Some(python) = std::env::var_os("FAUXPAY_STRIPE_PYTHON") {
        return Ok(python.into());
    }
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("stripe-python-{SDK}"));
    let python = venv.join("bin").join("python");
    let has_sdk = |python: &Path| {
        Command::new(python)
            .args([
                "-c",
                &format!("import stripe, sys; sys.exit(stripe.VERSION != '{SDK}')"),
            ])
            .status()
            .is_ok_and(|s| s.success())
    };
    if has_sdk(&python) {
        return Ok(python);
    }
    let run = |cmd: &mut Command| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
        match out.status.success() {
            true => Ok(()),
            false => Err(format!(
                "{cmd:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    };
    run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    run(Command::new(&python).args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        &format!("stripe=={SDK}"),
    ]))?;
    match has_sdk(&python) {
        true => Ok(python),
        false => Err(format!(
            "{} does not import stripe {SDK} after installing it",
            python.display()
        )),
    }
}

/// Runs one flow of `flows.py` against `h`'s provider: its JSON line, or a panic with
/// the SDK's traceback.
async fn flow(python: &Path, name: &str, h: &Harness) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stripe_python/flows.py");
    let out = tokio::process::Command::new(python)
        .arg(script)
        .args([name, &h.provider.url()])
        .output()
        .await
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "flow {name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("the flow prints one JSON line")
}

/// The ledger's charges for one order (its `metadata[order_id]`).
async fn charges_for(h: &Harness, order: &str) -> Vec<Value> {
    h.ledger("")
        .await
        .into_iter()
        .filter(|r| r["kind"] == "charge" && r["correlation_id"] == order)
        .collect()
}

#[tokio::test]
async fn the_official_python_sdk_runs_its_payment_flows() {
    let Some(python) = python() else { return };
    let h = Harness::default().await;
    let seen = flow(python, "payments", &h).await;

    // What the SDK was told succeeded is what the ledger holds, once each.
    for (order, id) in ["py-1", "py-2", "py-3", "py-4"]
        .iter()
        .zip(seen["succeeded"].as_array().unwrap())
    {
        let charges = charges_for(&h, order).await;
        assert_eq!(charges.len(), 1, "{order}: {charges:?}");
        assert_eq!(&charges[0]["payment_intent"], id, "{order}");
    }
    // The decline and the 3-D Secure challenge charged nothing.
    assert!(charges_for(&h, "py-declined").await.is_empty());
    assert!(charges_for(&h, "py-5").await.is_empty());
    let summary = h.summary().await;
    assert_eq!(summary["duplicate_group_count"], 0, "{summary}");
    assert_eq!(summary["refunds"], 1, "{summary}");
}

#[tokio::test]
async fn the_official_python_sdk_verifies_fauxpays_webhooks() {
    let Some(python) = python() else { return };
    let h = Harness::default().await;
    let seen = flow(python, "webhooks", &h).await;
    assert_eq!(seen["verified"], 6, "{seen}");
}

/// The provider loses the answer to each key's first attempt, after the charge: the
/// SDK's own retry (same key) gets the charge back as a replay, while an application
/// retrying around the SDK (a new key per call) charges the order twice, and the ledger
/// says so.
#[tokio::test]
async fn the_sdks_retries_charge_once_and_retries_around_it_charge_twice() {
    let Some(python) = python() else { return };
    let profile = Profile::builder("lose-first-answer")
        .seed(1)
        .rule(
            Rule::drop_response()
                .after_commit()
                .first_attempts(1)
                .method("POST")
                .path("/v1/payment_intents"),
        )
        .build()
        .unwrap();
    let h = Harness::start(with_profile(profile)).await;
    let seen = flow(python, "retries", &h).await;

    let kept = charges_for(&h, "py-sdk-retry").await;
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0]["payment_intent"], seen["kept"]);
    let doubled = charges_for(&h, "py-app-retry").await;
    assert_eq!(doubled.len(), 2, "{doubled:?}");
    assert_ne!(doubled[0]["idempotency_key"], doubled[1]["idempotency_key"]);
    let summary = h.summary().await;
    let groups = summary["duplicate_groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{summary}");
    assert_eq!(groups[0]["correlation_id"], "py-app-retry");
    assert_eq!(groups[0]["charge_count"], 2);
}
