//! The Stripe.js stand-in (`GET /v3/`): served as JavaScript any origin may load, and its
//! API surface checked against Stripe's published TypeScript types (`@stripe/stripe-js`
//! on npm, pinned: [`TYPES_VERSION`]) by `stripe_js/surface.cjs`: every function it
//! defines is declared there, its results and errors carry the types' fields, and
//! `loadStripe` resolves to it once it is on the page. The browser's view (a storefront
//! paying through it) is tests/it/storefront.rs in the `fauxpay` package.
//!
//! The package is installed under `target/tmp` on first use (npm, a few seconds), or
//! `FAUXPAY_STRIPE_JS_TYPES` names a folder that holds it. Without Node or the registry
//! the test says so on stderr and passes, except under `CI`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use fauxpay_testkit::provider::{missing_tool, Harness};

/// The `@stripe/stripe-js` release the surface is checked against.
const TYPES_VERSION: &str = "10.2.1";

/// The installed package (`…/node_modules/@stripe/stripe-js`), installed when missing.
fn types_package() -> Result<PathBuf, String> {
    if let Some(given) = std::env::var_os("FAUXPAY_STRIPE_JS_TYPES") {
        let dir = PathBuf::from(given);
        return match dir.join("package.json").is_file() {
            true => Ok(dir),
            false => Err(format!("FAUXPAY_STRIPE_JS_TYPES={} holds no package", dir.display())),
        };
    }
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("stripe-js-{TYPES_VERSION}"));
    let dir = prefix.join("node_modules/@stripe/stripe-js");
    let ready = || {
        std::fs::read_to_string(dir.join("package.json"))
            .is_ok_and(|p| p.contains(&format!("\"version\": \"{TYPES_VERSION}\"")))
    };
    if !ready() {
        std::fs::create_dir_all(&prefix).map_err(|e| format!("{}: {e}", prefix.display()))?;
        let out = Command::new("npm")
            .args([
                "install",
                "--silent",
                "--no-audit",
                "--no-fund",
                "--no-save",
                "--prefix",
            ])
            .arg(&prefix)
            .arg(format!("@stripe/stripe-js@{TYPES_VERSION}"))
            .output()
            .map_err(|e| format!("npm: {e}"))?;
        if !out.status.success() || !ready() {
            return Err(format!(
                "npm install failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(dir)
}

#[tokio::test]
async fn the_stand_in_is_served_to_any_origin() {
    let h = Harness::default().await;
    for path in ["/v3/", "/js.stripe.com/v3/"] {
        let resp = h.client.get(h.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let headers = resp.headers().clone();
        assert_eq!(headers["content-type"], "application/javascript; charset=utf-8");
        assert_eq!(headers["access-control-allow-origin"], "*");
        let body = resp.text().await.unwrap();
        assert!(body.contains("window.Stripe"), "{path}");
    }
    // The API answers a storefront on another origin (the preflight, then the call).
    let preflight = h
        .client
        .request(reqwest::Method::OPTIONS, h.url("/v1/payment_methods"))
        .header("origin", "http://shop.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "authorization, content-type")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 204);
    let allowed = preflight.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        allowed.contains("Authorization") && allowed.contains("Content-Type"),
        "{allowed}"
    );
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
    let call = h
        .client
        .post(h.url("/v1/payment_methods"))
        .bearer_auth("pk_test_cors")
        .header("origin", "http://shop.example")
        .form(&[("type", "card"), ("card[token]", "tok_visa")])
        .send()
        .await
        .unwrap();
    assert_eq!(call.status(), 200);
    assert_eq!(call.headers()["access-control-allow-origin"], "*");
    // The admin API is not the API: no CORS there.
    let admin = h.client.get(h.url("/__fauxpay/summary")).send().await.unwrap();
    assert!(admin.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn the_stand_ins_surface_is_stripe_js_s() {
    let pkg = match types_package() {
        Ok(p) => p,
        Err(why) => return missing_tool("the Stripe.js types test", &why),
    };
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("node")
        .arg(here.join("tests/it/stripe_js/surface.cjs"))
        .arg(here.join("assets/stripe-v3.js"))
        .arg(&pkg)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => return missing_tool("the Stripe.js types test", &format!("node: {e}")),
    };
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii()).expect("one JSON line");
    let functions = seen["stripe"].as_array().unwrap();
    for expected in [
        "confirmPayment",
        "confirmCardPayment",
        "handleNextAction",
        "retrievePaymentIntent",
    ] {
        assert!(functions.iter().any(|f| f == expected), "{expected}: {seen}");
    }
}
