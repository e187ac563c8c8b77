//! Stripe's official SDKs run a service's payment flows against fauxpay with nothing
//! changed but their base address: the Python SDK (`stripe` on PyPI) and the Node SDK
//! (`stripe` on npm), each pinned ([`Sdk::version`]), each running the same flows
//! (`tests/official_sdks/flows.py`, `flows.cjs`): their objects, card errors, parameter
//! errors, idempotent replays and refused key reuse, refunds, captures, auto-paging and
//! search, a saved card charged off-session, 3-D Secure, events, webhooks checked by the
//! SDK's own verifier, the SDK's automatic retries against answers lost after the
//! charge, products, prices and Checkout Sessions (with `checkout.session.completed`
//! delivered twice), and a client made with a publishable key. The test then checks the provider's ledger against what the SDK was told.
//!
//! Each SDK is installed under `target/tmp` on first use (from PyPI or npm, a few
//! seconds), or `FAUXPAY_STRIPE_PYTHON` names a Python that imports it and
//! `FAUXPAY_STRIPE_NODE_MODULES` a `node_modules` that holds it. Without the tools or the
//! registry the tests say so on stderr and pass, except under `CI`, where they fail.

use fauxpay_testkit::provider as common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{with_profile, Harness};
use fauxpay_faults::{Profile, Rule, WebhookRule};
use serde_json::Value;

#[derive(Clone, Copy, Debug)]
enum Sdk {
    Python,
    Node,
}

/// How to run an installed SDK's flows: the program, its script, and its environment.
struct Runner {
    program: PathBuf,
    script: &'static str,
    env: Vec<(&'static str, OsString)>,
}

impl Sdk {
    /// The SDK release the flows are written against.
    fn version(self) -> &'static str {
        match self {
            Sdk::Python => "16.1.0",
            Sdk::Node => "23.2.0",
        }
    }

    /// The installed SDK, installed on first use; `None` (said on stderr) when it cannot
    /// be and `CI` is unset.
    fn runner(self) -> Option<&'static Runner> {
        static PYTHON: OnceLock<Result<Runner, String>> = OnceLock::new();
        static NODE: OnceLock<Result<Runner, String>> = OnceLock::new();
        // Said once, by the first test to look (each fails under CI).
        let install = || {
            self.install()
                .inspect_err(|why| common::missing_tool(&format!("the official {self:?} SDK tests"), why))
        };
        let installed = match self {
            Sdk::Python => PYTHON.get_or_init(install),
            Sdk::Node => NODE.get_or_init(install),
        };
        installed.as_ref().ok()
    }

    /// The SDK named by its environment variable (checked, never installed over), else
    /// the one under `target/tmp`, installed there when it is missing.
    fn install(self) -> Result<Runner, String> {
        let version = self.version();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("stripe-{self:?}-{version}").to_lowercase());
        let (var, script) = match self {
            Sdk::Python => ("FAUXPAY_STRIPE_PYTHON", "flows.py"),
            Sdk::Node => ("FAUXPAY_STRIPE_NODE_MODULES", "flows.cjs"),
        };
        let given = std::env::var_os(var).map(PathBuf::from);
        let runner = match self {
            Sdk::Python => Runner {
                program: given.clone().unwrap_or_else(|| dir.join("bin").join("python")),
                script,
                env: Vec::new(),
            },
            Sdk::Node => Runner {
                program: "node".into(),
                script,
                env: vec![(
                    "NODE_PATH",
                    given.clone().unwrap_or_else(|| dir.join("node_modules")).into(),
                )],
            },
        };
        if self.ready(&runner) {
            return Ok(runner);
        }
        if let Some(given) = given {
            return Err(format!("{var}={} does not hold stripe {version}", given.display()));
        }
        match self {
            Sdk::Python => {
                run(Command::new("python3").args(["-m", "venv"]).arg(&dir))?;
                run(Command::new(&runner.program)
                    .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
                    .arg(format!("stripe=={version}")))?;
            }
            Sdk::Node => {
                std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                run(Command::new("npm")
                    .args([
                        "install",
                        "--silent",
                        "--no-audit",
                        "--no-fund",
                        "--no-save",
                        "--prefix",
                    ])
                    .arg(&dir)
                    .arg(format!("stripe@{version}")))?;
            }
        }
        match self.ready(&runner) {
            true => Ok(runner),
            false => Err(format!("{} is not stripe {version} after installing it", dir.display())),
        }
    }

    /// Whether `runner` reaches the pinned SDK release.
    fn ready(self, runner: &Runner) -> bool {
        let version = self.version();
        match self {
            Sdk::Python => run(Command::new(&runner.program).args([
                "-c",
                &format!("import stripe, sys; sys.exit(stripe.VERSION != '{version}')"),
            ]))
            .is_ok(),
            Sdk::Node => runner.env.iter().any(|(_, modules)| {
                std::fs::read_to_string(Path::new(modules).join("stripe").join("package.json"))
                    .is_ok_and(|p| p.contains(&format!("\"version\": \"{version}\"")))
            }),
        }
    }
}

/// Runs `cmd`; its stderr when it cannot start or fails.
fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// Runs one flow against `h`'s provider: its JSON line, or a panic with the SDK's error.
async fn flow(runner: &Runner, name: &str, h: &Harness) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/official_sdks")
        .join(runner.script);
    let out = tokio::process::Command::new(&runner.program)
        .arg(script)
        .args([name, &h.provider.url()])
        .envs(runner.env.iter().map(|(k, v)| (k, v)))
        .output()
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", runner.program.display()));
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

async fn payment_flows(sdk: Sdk) {
    let Some(runner) = sdk.runner() else { return };
    let h = Harness::default().await;
    let seen = flow(runner, "payments", &h).await;

    // What the SDK was told succeeded is what the ledger holds, once each.
    let orders = ["sdk-1", "sdk-2", "sdk-3", "sdk-4"];
    for (order, id) in orders.iter().zip(seen["succeeded"].as_array().unwrap()) {
        let charges = charges_for(&h, order).await;
        assert_eq!(charges.len(), 1, "{order}: {charges:?}");
        assert_eq!(&charges[0]["payment_intent"], id, "{order}");
    }
    // The decline and the 3-D Secure challenge charged nothing.
    assert!(charges_for(&h, "sdk-declined").await.is_empty());
    assert!(charges_for(&h, "sdk-5").await.is_empty());
    let summary = h.summary().await;
    assert_eq!(summary["duplicate_group_count"], 0, "{summary}");
    assert_eq!(summary["refunds"], 1, "{summary}");
}

async fn webhook_flows(sdk: Sdk) {
    let Some(runner) = sdk.runner() else { return };
    let h = Harness::default().await;
    let seen = flow(runner, "webhooks", &h).await;
    assert_eq!(seen["verified"], 6, "{seen}");
}

/// The provider loses the answers to each key's first two attempts, after the charge:
/// the SDK's own retries (same key) get the charge back as a replay, while an application
/// retrying around the SDK (a new key per call) charges the order twice, and the
/// ledger's duplicate group says so.
async fn retry_flows(sdk: Sdk) {
    let Some(runner) = sdk.runner() else { return };
    let profile = Profile::builder("lose-first-answers")
        .seed(1)
        .rule(
            Rule::drop_response()
                .after_commit()
                .first_attempts(2)
                .method("POST")
                .path("/v1/payment_intents"),
        )
        .build()
        .unwrap();
    let h = Harness::start(with_profile(profile)).await;
    let seen = flow(runner, "retries", &h).await;

    let kept = charges_for(&h, "sdk-own-retry").await;
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0]["payment_intent"], seen["kept"]);
    let doubled = charges_for(&h, "sdk-app-retry").await;
    assert_eq!(doubled.len(), 2, "{doubled:?}");
    assert_ne!(doubled[0]["idempotency_key"], doubled[1]["idempotency_key"]);
    let summary = h.summary().await;
    let groups = summary["duplicate_groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{summary}");
    assert_eq!(groups[0]["correlation_id"], "sdk-app-retry");
    assert_eq!(groups[0]["charge_count"], 2);
}

/// Products, prices and a Checkout Session through the SDK; the customer pays (fauxpay's
/// scripted pay); `checkout.session.completed`, delivered twice by the profile, verified
/// by the SDK: one charge, for the session, in the ledger.
async fn checkout_flows(sdk: Sdk) {
    let Some(runner) = sdk.runner() else { return };
    let profile = Profile::builder("completed-twice")
        .seed(1)
        .webhook(WebhookRule::duplicate(2).event("checkout.session.completed"))
        .build()
        .unwrap();
    let h = Harness::start(with_profile(profile)).await;
    let seen = flow(runner, "checkout", &h).await;
    assert_eq!(seen["deliveries"], 2, "{seen}");
    let charges = charges_for(&h, "sdk-cs-1").await;
    assert_eq!(charges.len(), 1, "{charges:?}");
    assert_eq!(charges[0]["checkout_session"], seen["session"]);
    assert_eq!(charges[0]["payment_intent"], seen["payment_intent"]);
}

/// A client made with a publishable key confirms an intent with its client_secret and
/// gets the SDK's permission error elsewhere; the ledger says a publishable key paid.
async fn browser_key_flows(sdk: Sdk) {
    let Some(runner) = sdk.runner() else { return };
    let h = Harness::default().await;
    let seen = flow(runner, "browser_key", &h).await;
    let charges = charges_for(&h, "sdk-pk-1").await;
    assert_eq!(charges.len(), 1, "{charges:?}");
    assert_eq!(charges[0]["payment_intent"], seen["payment_intent"]);
    assert_eq!(charges[0]["key_type"], "publishable");
}

#[tokio::test]
async fn the_python_sdk_sells_with_checkout_sessions() {
    checkout_flows(Sdk::Python).await;
}

#[tokio::test]
async fn the_node_sdk_sells_with_checkout_sessions() {
    checkout_flows(Sdk::Node).await;
}

#[tokio::test]
async fn the_python_sdk_with_a_publishable_key_confirms_in_the_browsers_place() {
    browser_key_flows(Sdk::Python).await;
}

#[tokio::test]
async fn the_node_sdk_with_a_publishable_key_confirms_in_the_browsers_place() {
    browser_key_flows(Sdk::Node).await;
}

#[tokio::test]
async fn the_python_sdk_runs_its_payment_flows() {
    payment_flows(Sdk::Python).await;
}

#[tokio::test]
async fn the_node_sdk_runs_its_payment_flows() {
    payment_flows(Sdk::Node).await;
}

#[tokio::test]
async fn the_python_sdk_verifies_fauxpays_webhooks() {
    webhook_flows(Sdk::Python).await;
}

#[tokio::test]
async fn the_node_sdk_verifies_fauxpays_webhooks() {
    webhook_flows(Sdk::Node).await;
}

#[tokio::test]
async fn the_python_sdks_retries_charge_once_and_retries_around_it_charge_twice() {
    retry_flows(Sdk::Python).await;
}

#[tokio::test]
async fn the_node_sdks_retries_charge_once_and_retries_around_it_charge_twice() {
    retry_flows(Sdk::Node).await;
}
