//! Fault injection observed from real client sockets: each kind, before and after the
//! commit, checked against the ledger; determinism across concurrency; hot swaps.

use fauxpay_testkit::provider as common;

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::time::{Duration, Instant};

use common::{charge_body, json, with_profile, Harness, KEY};
use fauxpay_faults::{self as faults, ms, secs, Fault, ForcedFault, Profile, Rule, When};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends one raw HTTP/1.1 POST and reads until the server closes: the bytes received,
/// or the I/O error (ECONNRESET for a reset).
async fn raw_post(h: &Harness, path: &str, body: &str, extra: &[(&str, &str)]) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect(h.provider.addr).await?;
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).await?;
    Ok(out)
}

/// A valid profile, or the test fails with every mistake.
fn built(builder: faults::ProfileBuilder) -> Profile {
    builder.build().unwrap_or_else(|e| panic!("{}", e.lines().join("\n")))
}

#[tokio::test]
async fn drop_response_after_commit_gives_eof_and_a_replayable_charge() {
    let h = Harness::default().await;
    let body = charge_body("drop-1", "pm_card_visa");
    let fault = Fault::drop_response(When::AfterCommit).header_value();
    let got = raw_post(
        &h,
        "/v1/payment_intents",
        &body,
        &[("Idempotency-Key", "kd"), ("Fauxpay-Fault", &fault)],
    )
    .await
    .unwrap();
    assert!(
        got.is_empty(),
        "zero response bytes, got {}",
        String::from_utf8_lossy(&got)
    );
    let ledger = h.ledger("").await;
    assert_eq!(ledger.len(), 1, "the money moved");
    assert!(
        ledger[0]["fault"]
            .as_str()
            .unwrap()
            .starts_with("drop_response after_commit"),
        "{}",
        ledger[0]
    );
    let retry = h.form("/v1/payment_intents", &body, Some("kd")).await;
    assert_eq!(
        retry.headers()["idempotent-replayed"],
        "true",
        "the stored success is replayed"
    );
    let (status, pi) = json(retry).await;
    assert_eq!(status, 200);
    assert_eq!(pi["status"], "succeeded");
    assert_eq!(h.ledger("").await.len(), 1, "and nothing is charged twice");
}

#[tokio::test]
async fn drop_response_before_commit_charges_and_stores_nothing() {
    let h = Harness::default().await;
    let body = charge_body("drop-2", "pm_card_visa");
    let fault = Fault::drop_response(When::BeforeCommit).header_value();
    let got = raw_post(
        &h,
        "/v1/payment_intents",
        &body,
        &[("Idempotency-Key", "kb"), ("Fauxpay-Fault", &fault)],
    )
    .await
    .unwrap();
    assert!(got.is_empty());
    assert!(h.ledger("").await.is_empty());
    let retry = h.form("/v1/payment_intents", &body, Some("kb")).await;
    assert!(
        retry.headers().get("idempotent-replayed").is_none(),
        "nothing was stored"
    );
    assert_eq!(retry.status(), 200);
    assert_eq!(h.ledger("").await.len(), 1);
}

#[tokio::test]
async fn magic_payment_methods_force_faults_through_a_merchant() {
    let h = Harness::default().await;
    let got = raw_post(
        &h,
        "/v1/payment_intents",
        &charge_body("magic", "pm_fault_drop_after_commit"),
        &[],
    )
    .await
    .unwrap();
    assert!(got.is_empty());
    let ledger = h.ledger("").await;
    assert_eq!(ledger.len(), 1);
    assert!(ledger[0]["fault"].as_str().unwrap().contains("forced"));
}

#[tokio::test]
async fn reset_gives_econnreset() {
    let h = Harness::default().await;
    for when in [When::BeforeCommit, When::AfterCommit] {
        let fault = Fault::reset(when).header_value();
        let err = raw_post(
            &h,
            "/v1/payment_intents",
            &charge_body(when.as_str(), "pm_card_visa"),
            &[("Fauxpay-Fault", &fault)],
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{when}");
    }
    let ledger = h.ledger("").await;
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["correlation_id"], "after_commit");
}

#[tokio::test]
async fn a_fault_ends_the_connection_of_a_request_the_router_serves_too() {
    // An id sent percent-encoded goes through axum's router, not Observe's dispatch: the
    // connection's control reaches its handler in the request's extensions.
    let h = Harness::default().await;
    let body = "amount=500&currency=usd&payment_method=pm_card_visa&metadata[order_id]=routed";
    let (status, pi) = json(h.form("/v1/payment_intents", body, None).await).await;
    assert_eq!(status, 200, "{pi}");
    let encoded = pi["id"].as_str().unwrap().replace('_', "%5F");
    let fault = Fault::reset(When::AfterCommit).header_value();
    let err = raw_post(
        &h,
        &format!("/v1/payment_intents/{encoded}/confirm"),
        "",
        &[("Fauxpay-Fault", &fault)],
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionReset);
    let ledger = h.ledger("").await;
    assert_eq!(
        ledger.len(),
        1,
        "the confirmation charged, then the connection was reset"
    );
    assert_eq!(ledger[0]["correlation_id"], "routed");
}

#[tokio::test]
async fn hang_outlasts_the_client_timeout() {
    let h = Harness::default().await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let err = client
        .post(h.url("/v1/payment_intents"))
        .bearer_auth(KEY)
        .header("Fauxpay-Fault", Fault::hang(When::AfterCommit, secs(3)).header_value())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(charge_body("hang-1", "pm_card_visa"))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert_eq!(
        h.ledger("").await.len(),
        1,
        "after the commit: the money moved, the client is in doubt"
    );
    let log: serde_json::Value = h.admin_json("/__fauxpay/requests?limit=5").await;
    let last = log["data"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|r| r["path"] == "/v1/payment_intents")
        .unwrap();
    assert_eq!(last["outcome"], "hung");
    assert_eq!(last["committed_status"], 200);
    // The client went away: the held request is released long before its 3 s.
    tokio::time::timeout(Duration::from_secs(2), h.wait_in_flight(0))
        .await
        .expect("the hang outlived its client");
}

#[tokio::test]
async fn error_after_commit_is_stored_and_the_charge_is_found_by_search() {
    let h = Harness::default().await;
    let body = charge_body("amb-1", "pm_card_visa");
    let first = h
        .post("/v1/payment_intents")
        .header("Idempotency-Key", "ka")
        .header("Fauxpay-Fault", Fault::error(When::AfterCommit, 503).header_value())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 503);
    let (_, err) = json(first).await;
    assert_eq!(err["error"]["type"], "api_error");
    let retry = h.form("/v1/payment_intents", &body, Some("ka")).await;
    assert_eq!(retry.status(), 503, "Stripe replays its stored 5xx");
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    let (_, found) = json(
        h.get("/v1/payment_intents/search")
            .query(&[("query", "metadata['order_id']:'amb-1'")])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        found["data"].as_array().unwrap().len(),
        1,
        "the client reconciles by searching"
    );
    assert_eq!(found["data"][0]["status"], "succeeded");
    assert_eq!(h.ledger("").await.len(), 1);
}

#[tokio::test]
async fn error_before_commit_and_rate_limits_are_not_stored() {
    let h = Harness::default().await;
    let body = charge_body("rl-1", "pm_card_visa");
    let send = |fault: Fault| {
        h.post("/v1/payment_intents")
            .header("Idempotency-Key", "kr")
            .header("Fauxpay-Fault", fault.header_value())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.clone())
            .send()
    };
    let limited = send(Fault::rate_limit(secs(2))).await.unwrap();
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["retry-after"], "2");
    let (_, err) = json(limited).await;
    assert_eq!(err["error"]["code"], "rate_limit");
    assert_eq!(send(Fault::error(When::BeforeCommit, 502)).await.unwrap().status(), 502);
    assert!(h.ledger("").await.is_empty());
    let ok = h.form("/v1/payment_intents", &body, Some("kr")).await;
    assert_eq!(ok.status(), 200);
    assert!(ok.headers().get("idempotent-replayed").is_none());
}

#[tokio::test]
async fn slow_body_dribbles_the_real_response() {
    let h = Harness::default().await;
    let started = Instant::now();
    let resp = h
        .post("/v1/payment_intents")
        .header("Fauxpay-Fault", Fault::slow_body(ms(600)).header_value())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(charge_body("slow", "pm_card_visa"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (_, pi) = json(resp).await;
    assert_eq!(pi["status"], "succeeded");
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the body took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_profile_decline_is_a_stored_card_error() {
    let profile = Profile::builder("d").seed(3).rule(Rule::decline("insufficient_funds"));
    let h = Harness::start(with_profile(built(profile))).await;
    let (status, err) = json(
        h.form("/v1/payment_intents", &charge_body("dec", "pm_card_visa"), Some("kdec"))
            .await,
    )
    .await;
    assert_eq!(status, 402);
    assert_eq!(err["error"]["decline_code"], "insufficient_funds");
    assert_eq!(err["error"]["payment_intent"]["status"], "requires_payment_method");
    let replay = h
        .form("/v1/payment_intents", &charge_body("dec", "pm_card_visa"), Some("kdec"))
        .await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
}

/// Which keys' first attempts were dropped, sending `keys` with `concurrency` at a time.
async fn dropped_keys(keys: &[String], concurrency: usize) -> BTreeSet<String> {
    // lost-responses' rule, without its latency, so the test stays quick.
    let profile = Profile::builder("lr")
        .seed(7)
        .rule(Rule::drop_response().after_commit().probability(0.2));
    let h = Harness::start(with_profile(built(profile))).await;
    let body = charge_body("det", "pm_card_visa");
    let mut dropped = BTreeSet::new();
    for chunk in keys.chunks(concurrency) {
        let sends = chunk.iter().map(|k| async {
            let r = raw_post(&h, "/v1/payment_intents", &body, &[("Idempotency-Key", k.as_str())]).await;
            (k.clone(), matches!(r, Ok(ref b) if b.is_empty()))
        });
        for (k, was_dropped) in futures_util::future::join_all(sends).await {
            if was_dropped {
                dropped.insert(k);
            }
        }
    }
    dropped
}

#[tokio::test]
async fn the_same_seed_gives_the_same_faults_under_any_concurrency() {
    let keys: Vec<String> = (0..150).map(|i| format!("det-{i}")).collect();
    let sequential = dropped_keys(&keys, 1).await;
    let mut reversed = keys.clone();
    reversed.reverse();
    let concurrent = dropped_keys(&reversed, 50).await;
    assert_eq!(sequential, concurrent);
    // lost-responses drops 20% of payment intent calls: the set is neither empty nor all.
    assert!(sequential.len() > 10 && sequential.len() < 60, "{}", sequential.len());
}

#[tokio::test]
async fn profiles_swap_at_run_time_and_invalid_ones_are_refused() {
    let h = Harness::default().await;
    let bad = h
        .client
        .put(h.url("/__fauxpay/profile"))
        .body("name = \"x\"\ndescription = \"x\"\nseed = 1\n[[rules]]\nkind = \"drop_response\"\nprobability = 1.5\n")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let (_, err) = json(bad).await;
    assert!(
        err["error"]["message"].as_str().unwrap().contains("probability"),
        "{err}"
    );
    let (_, current) = json(h.client.get(h.url("/__fauxpay/profile")).send().await.unwrap()).await;
    assert_eq!(current["profile"]["name"], "happy", "the old profile stays");

    // Swap while requests are in flight: every request is answered by one profile or the other.
    let body = charge_body("swap", "pm_card_visa");
    let keys: Vec<String> = (0..60).map(|i| format!("sw-{i}")).collect();
    let (hr, br) = (&h, &body);
    let load = futures_util::future::join_all(
        keys.iter()
            .map(|k| async move { raw_post(hr, "/v1/payment_intents", br, &[("Idempotency-Key", k.as_str())]).await }),
    );
    let swap = h
        .client
        .put(h.url("/__fauxpay/profile"))
        .body(faults::bundled::text("lost-responses").unwrap())
        .send();
    let (results, swapped) = tokio::join!(load, swap);
    assert_eq!(swapped.unwrap().status(), 200);
    for r in results {
        let bytes = r.expect("no request fails other than by the profile's drops");
        assert!(
            bytes.is_empty() || bytes.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
    }
    let (_, current) = json(h.client.get(h.url("/__fauxpay/profile")).send().await.unwrap()).await;
    assert_eq!(current["profile"]["name"], "lost-responses");
    let json_profile = built(Profile::builder("j").seed(9).rule(Rule::rate_limit(secs(1)))).to_json();
    let ok = h
        .client
        .put(h.url("/__fauxpay/profile"))
        .header("content-type", "application/json")
        .body(json_profile)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(h.form("/v1/payment_intents", &body, None).await.status(), 429);
    let metrics = h.metrics().await;
    assert!(
        metrics.contains("fauxpay_faults_total{kind=\"rate_limit\",when=\"before_commit\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_request_log_explains_each_attempt() {
    let profile = Profile::builder("f")
        .seed(5)
        .rule(Rule::drop_response().after_commit().first_attempts(1));
    let h = Harness::start(with_profile(built(profile))).await;
    let body = charge_body("log-1", "pm_card_visa");
    assert!(raw_post(&h, "/v1/payment_intents", &body, &[("Idempotency-Key", "kl")])
        .await
        .unwrap()
        .is_empty());
    let second = h.form("/v1/payment_intents", &body, Some("kl")).await;
    assert_eq!(
        second.headers()["idempotent-replayed"],
        "true",
        "fail once, then succeed"
    );
    let (_, log) = json(
        h.client
            .get(h.url("/__fauxpay/requests?identity=kl"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let entries = log["data"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["attempt"], 1);
    assert_eq!(entries[0]["outcome"], "dropped");
    assert!(entries[0]["fault"]
        .as_str()
        .unwrap()
        .starts_with("drop_response after_commit (rule 0)"));
    assert!(entries[0]["object"].as_str().unwrap().starts_with("pi_"));
    assert_eq!(entries[1]["attempt"], 2);
    assert_eq!(entries[1]["outcome"], "200");
    assert_eq!(entries[1]["replayed"], true);
    assert_eq!(entries[1]["correlation_id"], "log-1");
}

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish() {
    let h = Harness::default().await;
    let url = h.url("/v1/payment_intents");
    let client = h.client.clone();
    let in_flight = tokio::spawn(async move {
        client
            .post(url)
            .bearer_auth(KEY)
            .header(
                "Fauxpay-Fault",
                ForcedFault::new().latency(ms(400), When::BeforeCommit).header_value(),
            )
            .header("content-type", "application/x-www-form-urlencoded")
            .body(charge_body("late", "pm_card_visa"))
            .send()
            .await
    });
    // Wait until the request is being served: the in-flight gauge says so.
    h.wait_in_flight(1).await;
    h.provider.shutdown().await.unwrap();
    let resp = in_flight.await.unwrap().expect("the in-flight request is answered");
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn a_key_is_in_flight_while_its_first_request_is_held() {
    let h = Harness::default().await;
    let body = charge_body("inflight", "pm_card_visa");
    let slow = h
        .post("/v1/payment_intents")
        .header("Idempotency-Key", "kf")
        .header(
            "Fauxpay-Fault",
            ForcedFault::new().latency(ms(800), When::BeforeCommit).header_value(),
        )
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.clone())
        .send();
    let slow = tokio::spawn(slow);
    h.wait_in_flight(1).await;
    let second = h.form("/v1/payment_intents", &body, Some("kf")).await;
    assert_eq!(second.status(), 409);
    assert_eq!(second.headers()["stripe-should-retry"], "true");
    let (_, err) = json(second).await;
    assert_eq!(err["error"]["code"], "idempotency_key_in_use");
    assert_eq!(slow.await.unwrap().unwrap().status(), 200);
    let third = h.form("/v1/payment_intents", &body, Some("kf")).await;
    assert_eq!(third.headers()["idempotent-replayed"], "true");
    assert_eq!(h.ledger("").await.len(), 1);
}

#[tokio::test]
async fn the_request_log_keeps_the_committed_status_behind_an_injected_error() {
    let h = Harness::default().await;
    let resp = h
        .post("/v1/payment_intents")
        .header("Idempotency-Key", "kc")
        .header("Fauxpay-Fault", Fault::error(When::AfterCommit, 500).header_value())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(charge_body("committed", "pm_card_visa"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 500);
    let (_, log) = json(
        h.client
            .get(h.url("/__fauxpay/requests?identity=kc"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(log["data"][0]["outcome"], "500");
    assert_eq!(log["data"][0]["committed_status"], 200);
}

#[tokio::test]
async fn shutdown_releases_held_requests() {
    let h = Harness::default().await;
    let url = h.url("/v1/payment_intents");
    let client = h.client.clone();
    let held = tokio::spawn(async move {
        client
            .post(url)
            .bearer_auth(KEY)
            .header(
                "Fauxpay-Fault",
                Fault::hang(When::BeforeCommit, secs(60)).header_value(),
            )
            .header("content-type", "application/x-www-form-urlencoded")
            .body(charge_body("held", "pm_card_visa"))
            .send()
            .await
    });
    h.wait_in_flight(1).await;
    // Bounded so a regression fails instead of waiting out the 60 s hang.
    tokio::time::timeout(Duration::from_secs(10), h.provider.shutdown())
        .await
        .expect("shutdown does not wait for a hang")
        .unwrap();
    assert!(held.await.unwrap().is_err(), "the held request's connection was closed");
}
