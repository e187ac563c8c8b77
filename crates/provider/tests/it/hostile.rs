//! Hostile clients, over real sockets (issue 13's probe table): slow and silent
//! connections, too many connections, huge and malformed requests, bodies that never
//! end or lie about their length, shutdown with partial requests, invalid input. Every
//! probe gets a bounded, Stripe-shaped answer (or a closed connection), quickly: the
//! servers here run with timeouts of a few hundred milliseconds, and every wait is
//! bounded by `within`.

use fauxpay_testkit::provider as common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{Harness, KEY};
use fauxpay_provider::{Config, Limits, RunningProvider};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Every probe's answer must come within this.
const BOUND: Duration = Duration::from_secs(5);

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {BOUND:?}"))
}

fn limits(header: u64, body: u64) -> Limits {
    Limits {
        header_timeout: Duration::from_millis(header),
        body_timeout: Duration::from_millis(body),
        ..Limits::default()
    }
}

async fn start(limits: Limits) -> RunningProvider {
    let config = Config {
        limits,
        ..Config::default()
    };
    RunningProvider::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// An HTTP answer read off a raw socket.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: Value,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// A Stripe error object of `kind`, sent as JSON.
    fn assert_stripe_error(&self, status: u16) -> &Value {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(self.header("content-type"), Some("application/json"), "{self:?}");
        let error = &self.body["error"];
        assert!(error["type"].is_string() && error["message"].is_string(), "{self:?}");
        error
    }
}

/// Reads one answer (head, then the body by Content-Length, else to the end).
async fn read_answer(stream: &mut TcpStream) -> Answer {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut chunk).await.expect("read");
        assert!(
            n > 0,
            "connection closed before an answer: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let status = head[9..12].parse().unwrap();
    let mut body = buf[head_end + 4..].to_vec();
    let length = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<usize>().unwrap())
    });
    match length {
        Some(n) => {
            while body.len() < n {
                let r = stream.read(&mut chunk).await.expect("read body");
                assert!(r > 0, "body cut short");
                body.extend_from_slice(&chunk[..r]);
            }
        }
        None => {
            let _ = stream.read_to_end(&mut body).await;
        }
    }
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Answer { status, head, body }
}

/// Sends `request` on a new connection and reads the answer.
async fn exchange(addr: SocketAddr, request: &[u8]) -> Answer {
    within("exchange", async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        // The server may answer and close before all of a large request is sent.
        let _ = s.write_all(request).await;
        read_answer(&mut s).await
    })
    .await
}

/// Waits until the server closes `stream` (EOF or reset), returning how long it took.
async fn closed(stream: &mut TcpStream) -> Duration {
    let started = Instant::now();
    within("close", async {
        let mut scratch = [0u8; 1024];
        loop {
            match stream.read(&mut scratch).await {
                Ok(0) | Err(_) => return started.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
}

fn post(path: &str, extra_headers: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

const PAYMENT: &str = "amount=1000&currency=usd&payment_method=pm_card_visa&confirm=true";

#[tokio::test]
async fn slow_and_silent_headers_are_cut_at_the_header_timeout() {
    let p = start(limits(200, 10_000)).await;
    let mut silent = TcpStream::connect(p.addr).await.unwrap();
    let mut slow = TcpStream::connect(p.addr).await.unwrap();
    slow.write_all(b"POST /v1/payment_intents HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let (a, b) = tokio::join!(closed(&mut silent), closed(&mut slow));
    assert!(
        a >= Duration::from_millis(150) && b >= Duration::from_millis(150),
        "{a:?} {b:?}"
    );
    // A client that does send its request in time is served as usual.
    let ok = exchange(p.addr, &post("/v1/payment_intents", "", PAYMENT)).await;
    assert_eq!(ok.status, 200, "{ok:?}");
    p.shutdown().await.unwrap();
}

#[tokio::test]
async fn connections_beyond_the_limit_are_refused_with_a_503_and_counted() {
    let p = start(Limits {
        max_connections: 4,
        ..limits(10_000, 10_000)
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(p.addr).await.unwrap());
    }
    // The four are open once the server counts them.
    within("four open", async {
        while p.provider.metrics.connections.get() < 4 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let refused = exchange(p.addr, &post("/v1/payment_intents", "", PAYMENT)).await;
    let error = refused.assert_stripe_error(503);
    assert!(
        error["message"].as_str().unwrap().contains("max-connections"),
        "{error}"
    );
    assert_eq!(p.provider.metrics.connections_refused.get(), 1);
    // A slot frees when a client leaves.
    drop(held.pop());
    within("a slot frees", async {
        while p.provider.metrics.connections.get() > 3 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let ok = exchange(p.addr, &post("/v1/payment_intents", "", PAYMENT)).await;
    assert_eq!(ok.status, 200, "{ok:?}");
    drop(held);
    p.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_huge_fault_header_is_refused_at_once() {
    let p = start(Limits::default()).await;
    let huge = format!("Fauxpay-Fault: {}\r\n", "latency; value=1ms,".repeat(20_000));
    let started = Instant::now();
    let answer = exchange(p.addr, &post("/v1/payment_intents", &huge, PAYMENT)).await;
    let error = answer.assert_stripe_error(400);
    assert_eq!(error["param"], "Fauxpay-Fault");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    p.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_lying_content_length_is_a_413_at_once() {
    let p = start(limits(10_000, 10_000)).await;
    let request = format!(
        "POST /v1/payment_intents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Length: 10000000000\r\n\r\namount=1"
    );
    let started = Instant::now();
    exchange(p.addr, request.as_bytes()).await.assert_stripe_error(413);
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    p.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_chunked_body_that_never_ends_is_cut() {
    let p = start(limits(10_000, 300)).await;
    let head = format!(
        "POST /v1/payment_intents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    // Past the body cap: 413 as soon as the cap is crossed.
    let answer = within("endless chunked body", async {
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        let chunk = format!("400\r\n{}\r\n", "a".repeat(1024));
        for _ in 0..100 {
            if s.write_all(chunk.as_bytes()).await.is_err() {
                break;
            }
        }
        read_answer(&mut s).await
    })
    .await;
    answer.assert_stripe_error(413);
    // A body that stops arriving: 408 at the body timeout.
    let answer = within("stalled chunked body", async {
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(b"8\r\namount=1\r\n").await.unwrap();
        read_answer(&mut s).await
    })
    .await;
    answer.assert_stripe_error(408);
    // A body none of which comes after its head (the timer is armed only for a body not
    // whole once the handler has asked twice): 408 too, whether a length was declared or not.
    for head in [
        head.clone(),
        format!(
            "POST /v1/payment_intents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Length: 8\r\n\r\n"
        ),
    ] {
        let answer = within("a body that never starts", async {
            let mut s = TcpStream::connect(p.addr).await.unwrap();
            s.write_all(head.as_bytes()).await.unwrap();
            read_answer(&mut s).await
        })
        .await;
        answer.assert_stripe_error(408);
    }
    // A malformed chunk size is the client's malformed request (400), not a body too large.
    let answer = within("malformed chunk size", async {
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(b"zz\r\namount=1\r\n0\r\n\r\n").await.unwrap();
        read_answer(&mut s).await
    })
    .await;
    answer.assert_stripe_error(400);
    p.shutdown().await.unwrap();
}

#[tokio::test]
async fn hypers_own_answers_are_stripe_errors() {
    let p = start(Limits::default()).await;
    // 400: not HTTP.
    exchange(p.addr, b"GARBAGE\r\n\r\n").await.assert_stripe_error(400);
    exchange(p.addr, b"GET / HTTP/1.1\r\nBad Header\r\n\r\n")
        .await
        .assert_stripe_error(400);
    // 431: too many header fields.
    let many: String = (0..200).map(|i| format!("X-H{i}: v\r\n")).collect();
    let request = format!("GET /v1/payment_intents HTTP/1.1\r\nHost: x\r\n{many}\r\n");
    exchange(p.addr, request.as_bytes()).await.assert_stripe_error(431);
    // 414: a request line too long.
    let request = format!(
        "GET /v1/payment_intents?q={} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(70_000)
    );
    exchange(p.addr, request.as_bytes()).await.assert_stripe_error(414);
    // And the server is fine.
    let ok = exchange(p.addr, &post("/v1/payment_intents", "", PAYMENT)).await;
    assert_eq!(ok.status, 200);
    p.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_cuts_partial_requests_at_the_deadline_and_lets_in_flight_ones_finish() {
    let p = start(Limits {
        shutdown_deadline: Duration::from_millis(300),
        ..limits(30_000, 30_000)
    })
    .await;
    let mut partial = Vec::new();
    for _ in 0..50 {
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        s.write_all(b"POST /v1/payment_intents HTTP/1.1\r\nHost: x\r\nContent-")
            .await
            .unwrap();
        partial.push(s);
    }
    // One request in flight (a 100 ms latency) when the shutdown begins.
    let mut busy = TcpStream::connect(p.addr).await.unwrap();
    busy.write_all(&post(
        "/v1/payment_intents",
        "Fauxpay-Fault: latency; value=100ms\r\n",
        PAYMENT,
    ))
    .await
    .unwrap();
    let metrics = p.provider.clone();
    within("in flight", async {
        while metrics.metrics.in_flight.get() < 1 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let started = Instant::now();
    let (stopped, answer) = tokio::join!(within("shutdown", p.shutdown()), read_answer(&mut busy));
    stopped.unwrap();
    assert_eq!(answer.status, 200, "the in-flight request finished: {answer:?}");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
    for mut s in partial {
        closed(&mut s).await;
    }
}

#[tokio::test]
async fn a_hang_fault_still_holds_past_the_header_timeout() {
    let p = start(limits(100, 10_000)).await;
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    s.write_all(&post(
        "/v1/payment_intents",
        "Fauxpay-Fault: hang; hang=500ms\r\n",
        PAYMENT,
    ))
    .await
    .unwrap();
    let held = closed(&mut s).await;
    assert!(held >= Duration::from_millis(450), "held only {held:?}");
    p.shutdown().await.unwrap();
}

#[tokio::test]
async fn invalid_input_is_a_400_naming_the_parameter() {
    let h = Harness::default().await;
    let addr = h.provider.addr;
    // Invalid UTF-8 in a form value: two different values must not become one.
    for bytes in ["%FF%FE", "%80%81"] {
        let body = format!("{PAYMENT}&metadata[order_id]={bytes}");
        let error = exchange(addr, &post("/v1/payment_intents", "", &body)).await;
        let error = error.assert_stripe_error(400);
        assert_eq!(error["code"], "parameter_invalid");
        assert_eq!(error["param"], "metadata[order_id]");
    }
    let summary: Value = h.summary().await;
    assert_eq!(summary["duplicate_group_count"], 0, "{summary}");
    assert_eq!(summary["charges"], 0, "{summary}");
    // NUL in a value.
    let error = exchange(
        addr,
        &post("/v1/payment_intents", "", &format!("{PAYMENT}&description=a%00b")),
    )
    .await;
    assert_eq!(error.assert_stripe_error(400)["param"], "description");
    // JSON bodies: the same parameter cap as forms.
    let keys: serde_json::Map<String, Value> = (0..5000).map(|i| (format!("k{i}"), Value::from(1))).collect();
    let resp = h
        .client
        .post(h.url("/v1/payment_intents"))
        .bearer_auth(KEY)
        .json(&keys)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    // An unterminated search quote.
    let resp = h
        .client
        .get(h.url("/v1/payment_intents/search"))
        .bearer_auth(KEY)
        .query(&[("query", "metadata['order_id']:'o-1")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["param"], "query");
    // Two Idempotency-Key headers.
    let two = "Idempotency-Key: a\r\nIdempotency-Key: b\r\n";
    let error = exchange(addr, &post("/v1/payment_intents", two, PAYMENT)).await;
    assert_eq!(error.assert_stripe_error(400)["param"], "Idempotency-Key");
    assert_eq!(h.provider.provider.payments.intents.len(), 0, "nothing was charged");
    h.provider.shutdown().await.unwrap();
}

#[tokio::test]
async fn anonymous_requests_leave_no_attempt_counters() {
    let h = Harness::default().await;
    for _ in 0..200 {
        let resp = h
            .client
            .get(h.url("/v1/payment_intents"))
            .bearer_auth(KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
    assert_eq!(h.provider.provider.faults.counted_identities(), 0);
    h.provider.shutdown().await.unwrap();
}

#[tokio::test]
async fn unbounded_profiles_are_refused_with_their_line() {
    let h = Harness::default().await;
    let profile = "name = \"x\"\ndescription = \"d\"\nseed = 1\n[[rules]]\nkind = \"hang\"\nhang = \"1000000000h\"\n";
    let resp = h
        .client
        .put(h.url("/__fauxpay/profile"))
        .body(profile)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("request body:6: rules[0].hang: expected a duration of at most 10m"),
        "{message}"
    );
    h.provider.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_admin_bearer_scheme_is_case_insensitive() {
    let h = Harness::start(Config {
        admin_token: Some("t0ken".into()),
        ..Config::default()
    })
    .await;
    for (auth, status) in [
        ("Bearer t0ken", 200),
        ("bearer t0ken", 200),
        ("BEARER t0ken", 200),
        ("Bearer t0ke", 401),
    ] {
        let resp = h
            .client
            .get(h.url("/__fauxpay/summary"))
            .header("Authorization", auth)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), status, "{auth}");
    }
    h.provider.shutdown().await.unwrap();
}

#[test]
fn the_open_file_limit_is_raised_to_the_hard_one() {
    let limit = fauxpay_provider::raise_open_file_limit();
    let now = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    assert_eq!(now.current, limit);
    assert_eq!(now.current, now.maximum, "soft = hard (where allowed)");
}
