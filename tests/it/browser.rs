//! The dashboard, `report.html` and the hosted Checkout page in a real browser: headless Chromium (Debian's
//! `chromium` and `chromium-driver`, which `.ci/run` installs) driven through
//! chromedriver by `fantoccini`. Each page is loaded against a provider with payments, a
//! duplicate group, faults and hostile metadata, and checked for what a person sees; an
//! invalid profile is pasted through the form; `report.html` opens without a console
//! error or any fetched resource. One screenshot per page goes to
//! `target/tmp/browser-screenshots/` (and, with `FAUXPAY_SCREENSHOTS=docs`, the ones
//! README shows to `docs/screenshots/`).
//!
//! Without chromedriver the test says so on stderr and passes, except under `CI`, where
//! it fails.

use fauxpay_testkit::dashboard as dashboard_common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use dashboard_common::{seed, HOSTILE};

use crate::support::load_report;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use fauxpay_provider::Config;
use serde_json::{json, Value};

/// chromedriver on a free port, stopped on drop.
pub(crate) struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

/// Starts chromedriver, waiting for its "started successfully" line (no sleeping).
pub(crate) fn driver() -> Option<Driver> {
    let Some(bin) = find(&["chromedriver"]) else {
        let msg = "chromedriver not found: install Debian's chromium and chromium-driver (.ci/run does)";
        fauxpay_testkit::provider::missing_tool("the browser tests", msg);
        return None;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(bin)
        .arg(format!("--port={port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let started = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("started successfully"));
    assert!(started, "chromedriver did not start");
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Some(Driver { child, port })
}

pub(crate) async fn browser(d: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    let binary = find(&["chromium", "chromium-browser", "google-chrome"]).expect("a Chromium next to chromedriver");
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": binary,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"]
        }),
    );
    caps.insert("goog:loggingPrefs".into(), json!({"browser": "ALL"}));
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", d.port))
        .await
        .expect("a Chromium session")
}

/// The browser's console since the last call (chromedriver's log endpoint).
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(json!({"type": "browser"}).to_string()))
    }
}

pub(crate) async fn console_errors(c: &Client) -> Vec<String> {
    let log = c.issue_cmd(BrowserLog).await.expect("the browser's log");
    log.as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["level"] == "SEVERE")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The pages whose screenshots README and docs/ show (kept in docs/screenshots/).
const IN_README: &[&str] = &["overview", "duplicates", "report", "checkout"];

pub(crate) async fn shoot(c: &Client, name: &str) {
    let png = c.screenshot().await.expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "{name}: a PNG");
    let mut dirs = vec![PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots")];
    if std::env::var("FAUXPAY_SCREENSHOTS").as_deref() == Ok("docs") && IN_README.contains(&name) {
        dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/screenshots"));
    }
    for dir in dirs {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
    }
}

/// The text of the element `css` names, waiting for it to appear (a form's answer is a
/// new page: the element exists once the browser has loaded it).
pub(crate) async fn text(c: &Client, css: &str) -> String {
    c.wait()
        .at_most(std::time::Duration::from_secs(20))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_sees_the_double_charge_the_faults_and_the_mistakes() {
    let Some(d) = driver() else { return };
    let s = seed(Config::default()).await;
    let base = s.harness.provider.url();
    let c = browser(&d).await;

    c.goto(&format!("{base}/__fauxpay/")).await.unwrap();
    let main = text(&c, "main").await;
    assert!(main.contains("orders charged twice or more"), "{main}");
    for ch in &s.charges {
        assert!(
            main.contains(ch.as_str()),
            "the duplicate group's charge {ch} is listed:\n{main}"
        );
    }
    assert!(main.contains("drop_response after_commit"), "{main}");
    shoot(&c, "overview").await;

    c.goto(&format!("{base}/__fauxpay/ui/duplicates")).await.unwrap();
    let story = text(&c, "section.story").await;
    assert!(story.contains("Order order-twice was charged 2 times"), "{story}");
    assert!(story.contains("The client never learned that"), "{story}");
    assert!(story.contains("new idempotency key (key-first, key-second)"), "{story}");
    shoot(&c, "duplicates").await;

    c.goto(&format!("{base}/__fauxpay/ui/payments/{}", s.charges[0]))
        .await
        .unwrap();
    let page = text(&c, "main").await;
    assert!(page.contains("key-first") && page.contains("dropped"), "{page}");
    shoot(&c, "payment").await;

    c.goto(&format!("{base}/__fauxpay/ui/requests?fault=any"))
        .await
        .unwrap();
    let requests = text(&c, "main table").await;
    assert!(
        requests.contains("error 503 before_commit (forced)"),
        "the fault is named:\n{requests}"
    );
    shoot(&c, "requests").await;

    // Hostile metadata is shown as text, and its script never ran.
    c.goto(&format!("{base}/__fauxpay/ui/payments")).await.unwrap();
    let payments = text(&c, "main").await;
    assert!(
        payments.contains(HOSTILE),
        "the metadata is shown as typed:\n{payments}"
    );
    assert_eq!(c.title().await.unwrap(), "Payments · fauxpay", "no injected script ran");
    let injected = c.find_all(Locator::Css("main img, main script")).await.unwrap();
    assert!(injected.is_empty(), "no element came from the metadata");
    shoot(&c, "payments").await;

    // An invalid profile pasted into the form: the mistakes appear inline.
    c.goto(&format!("{base}/__fauxpay/ui/profile")).await.unwrap();
    let area = c.find(Locator::Css("textarea[name=toml]")).await.unwrap();
    area.send_keys("name = \"mine\"\ndescription = \"d\"\nseed = \"one\"\n")
        .await
        .unwrap();
    c.find(Locator::XPath("//button[contains(., 'Validate and activate')]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let errors = text(&c, "#profile-errors").await;
    assert!(
        errors.contains("pasted profile:3: seed: expected a non-negative integer"),
        "{errors}"
    );
    let active = text(&c, "dl.kv").await;
    assert!(active.contains("happy"), "the active profile stayed:\n{active}");
    shoot(&c, "profile").await;

    // The refused paste is answered 400 on purpose; anything else is a fault.
    let errors: Vec<String> = console_errors(&c)
        .await
        .into_iter()
        .filter(|e| {
            !e.contains("/__fauxpay/ui/profile - Failed to load resource: the server responded with a status of 400")
        })
        .collect();
    assert!(errors.is_empty(), "the dashboard logged errors: {errors:?}");

    // report.html: a load run against this provider, answers lost after the commit, so
    // the new-key client double-charges; opened from disk.
    let swap = s
        .harness
        .client
        .put(s.harness.url("/__fauxpay/profile"))
        .body(fauxpay_faults::bundled::text("lost-responses").unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(swap.status(), 200);
    let out = load_report(&s.harness, "browser").await;
    let report = out.join("report.html");
    c.goto(&format!("file://{}", report.display())).await.unwrap();
    assert_eq!(c.title().await.unwrap(), "fauxpay load report");
    let charts = c.find_all(Locator::Css("figure[data-chart] svg")).await.unwrap();
    assert_eq!(charts.len(), 4, "four charts drawn");
    let stories = c.find_all(Locator::Css("section.story")).await.unwrap();
    let json: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let examples = json["gates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["examples"].as_array().map_or(0, Vec::len))
        .sum::<usize>();
    assert!(examples > 0, "lost answers and new keys make double charges");
    assert_eq!(stories.len(), examples, "one story per anomaly example");
    let fetched = c
        .execute("return performance.getEntriesByType('resource').length", vec![])
        .await
        .unwrap();
    assert_eq!(fetched, json!(0), "self-contained: nothing fetched");
    let errors = console_errors(&c).await;
    assert!(errors.is_empty(), "report.html logged errors: {errors:?}");
    c.execute("document.querySelector('figure[data-chart]').scrollIntoView()", vec![])
        .await
        .unwrap();
    shoot(&c, "report").await;

    c.close().await.unwrap();
    std::fs::remove_dir_all(out).ok();
}

/// A Checkout Session for one 19.99 USD T-shirt on `base`, sending the customer to
/// `{base}/shop/done?session_id=…` once paid: its id and its hosted page's URL.
async fn checkout_session(client: &reqwest::Client, base: &str) -> (String, String) {
    let post = |path: &str, body: String| {
        client
            .post(format!("{base}{path}"))
            .bearer_auth(fauxpay_testkit::provider::KEY)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let product: Value = post(
        "/v1/products",
        "name=T-shirt&default_price_data[currency]=usd&default_price_data[unit_amount]=1999".into(),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let price = product["default_price"].as_str().unwrap();
    let success = format!("{base}/shop/done?session_id={{CHECKOUT_SESSION_ID}}");
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("mode", "payment")
        .append_pair("line_items[0][price]", price)
        .append_pair("line_items[0][quantity]", "1")
        .append_pair("success_url", &success)
        .append_pair("cancel_url", &format!("{base}/shop/cart"));
    let body = form.finish();
    let session: Value = post("/v1/checkout/sessions", body).await.unwrap().json().await.unwrap();
    (
        session["id"].as_str().unwrap().to_string(),
        session["url"].as_str().unwrap().to_string(),
    )
}

/// Opens the hosted page at `url`, fills its form with `card` and presses Pay.
async fn pay_on_the_page(c: &Client, url: &str, card: &str) {
    c.goto(url).await.unwrap();
    fill_and_pay(c, card).await;
}

/// On the hosted Checkout page (waiting for it): fills the email and `card`, presses Pay.
pub(crate) async fn fill_and_pay(c: &Client, card: &str) {
    c.wait()
        .at_most(std::time::Duration::from_secs(20))
        .for_element(Locator::Css("#email"))
        .await
        .expect("fauxpay's Checkout page")
        .send_keys("jenny@example.com")
        .await
        .unwrap();
    c.find(Locator::Css("#card"))
        .await
        .unwrap()
        .send_keys(card)
        .await
        .unwrap();
    c.find(Locator::Css("#pay")).await.unwrap().click().await.unwrap();
}

/// Waits until the browser is at `url` (after the redirects a form's answer starts).
pub(crate) async fn arrives_at(c: &Client, url: &str) {
    let arrived = c
        .wait()
        .at_most(std::time::Duration::from_secs(20))
        .for_url(&url::Url::parse(url).unwrap())
        .await;
    if let Err(e) = arrived {
        panic!("the browser never reached {url}: {e} (at {:?})", c.current_url().await);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_customer_pays_on_the_hosted_checkout_page() {
    let Some(d) = driver() else { return };
    let h = fauxpay_testkit::provider::Harness::default().await;
    let base = h.provider.url();
    let c = browser(&d).await;

    // A card that pays: Pay lands on the success_url with the session's id filled in.
    let (sid, url) = checkout_session(&h.client, &base).await;
    c.goto(&url).await.unwrap();
    let page = text(&c, "body").await;
    assert!(page.contains("T-shirt") && page.contains("19.99 USD"), "{page}");
    shoot(&c, "checkout").await;
    let errors = console_errors(&c).await;
    assert!(errors.is_empty(), "{errors:?}");
    pay_on_the_page(&c, &url, "4242 4242 4242 4242").await;
    arrives_at(&c, &format!("{base}/shop/done?session_id={sid}")).await;

    // A 3-D Secure card: Pay goes through the challenge page and back, then on.
    let (sid3, url3) = checkout_session(&h.client, &base).await;
    pay_on_the_page(&c, &url3, "4000 0027 6000 3184").await;
    let complete = c
        .wait()
        .at_most(std::time::Duration::from_secs(20))
        .for_element(Locator::XPath("//button[contains(., 'Complete authentication')]"))
        .await
        .expect("the 3-D Secure page");
    assert!(c.current_url().await.unwrap().path().starts_with("/__fauxpay/3ds/pi_"));
    complete.click().await.unwrap();
    arrives_at(&c, &format!("{base}/shop/done?session_id={sid3}")).await;

    // A declined card: the page says so and the session stays open.
    let (declined, url4) = checkout_session(&h.client, &base).await;
    pay_on_the_page(&c, &url4, "4000 0000 0000 0002").await;
    let alert = text(&c, "p.error").await;
    assert_eq!(alert, "Your card was declined.");
    let session: Value = h
        .get(&format!("/v1/checkout/sessions/{declined}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(session["status"], "open");

    let ledger = h.ledger("").await;
    let paid: Vec<&str> = ledger.iter().map(|r| r["checkout_session"].as_str().unwrap()).collect();
    assert_eq!(paid, [sid.as_str(), sid3.as_str()], "one charge per paid session");
    c.close().await.unwrap();
}
