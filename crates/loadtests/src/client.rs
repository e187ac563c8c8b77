//! The retrying client: one logical payment, attempted the way a real client would.
//!
//! [`run_checkout`] sends a checkout through a [`Transport`] and retries it according to
//! its [`Behaviour`]: timeouts, connection errors, 409, 429 and 5xx are retried with
//! exponential backoff and full jitter (at least `Retry-After` when the answer has one,
//! never when `Stripe-Should-Retry: false`); 2xx and other 4xx are definite answers and
//! end the payment. Each attempt becomes an [`AttemptRecord`], and the payment ends as
//! `ok`, `fail` or `info` (indeterminate), in Jepsen's terms.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::mix::Behaviour;
use crate::template::{Rendered, Template, Values};

/// How an attempt failed without an HTTP answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    Timeout,
    Reset,
    Eof,
    Connect,
    /// An answer longer than [`crate::body::MAX_ANSWER_BYTES`]: its status came, its
    /// body was cut, so the client cannot tell what it says.
    TooLarge,
    Other,
}

/// What a step other than the payment step got back.
#[derive(Debug)]
pub enum StepAnswer {
    Answer {
        status: u16,
        headers: reqwest::header::HeaderMap,
        body: Vec<u8>,
    },
    Failed {
        kind: FailureKind,
    },
}

/// What one attempt got back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum AttemptResult {
    Answer {
        status: u16,
        payment_id: Option<String>,
        replayed: bool,
        #[serde(skip)]
        retry_after: Option<Duration>,
        #[serde(skip)]
        should_retry: Option<bool>,
    },
    Failed {
        kind: FailureKind,
    },
}

/// One attempt of a logical payment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub n: u32,
    pub key: Option<String>,
    /// Microseconds since the run started.
    pub start_us: u64,
    pub elapsed_us: u64,
    #[serde(flatten)]
    pub result: AttemptResult,
}

/// A logical payment's outcome (Jepsen's history model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The client was told the payment succeeded.
    Ok,
    /// The client was told the payment definitely failed.
    Fail,
    /// Retries ran out without a definite answer: the money may or may not have moved.
    Info,
}

/// One logical payment (a checkout) and what happened to it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PaymentRecord {
    pub order_id: String,
    pub amount: u64,
    pub behaviour: Behaviour,
    pub outcome: Outcome,
    /// End to end, retries and backoff included (every step of a multi-step flow).
    pub e2e_us: u64,
    pub attempts: Vec<AttemptRecord>,
    /// A multi-step flow's other steps (the payment step's sends are `attempts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<crate::steps::StepRecord>,
    /// What a `--data` feeder said the payment should end as (`ok` or `fail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Outcome>,
}

/// The checkout to attempt.
#[derive(Debug, Clone)]
pub struct Checkout {
    pub order_id: String,
    pub amount: u64,
    /// Shared by every checkout of a run (no copy per payment).
    pub currency: Arc<str>,
    pub payment_method: Arc<str>,
    pub api_key: Arc<str>,
    pub behaviour: Behaviour,
    /// The feeder's row, then what the flow's earlier steps captured (empty for a
    /// one-request template without `--data`).
    pub captures: Vec<Option<String>>,
    /// What the feeder's row says the payment should end as.
    pub expect: Option<Outcome>,
}

impl Checkout {
    /// The values a request of this checkout fills in, with `key` and `captures`.
    pub fn values<'a>(&'a self, key: Option<&'a str>, captures: &'a [Option<String>]) -> Values<'a> {
        Values {
            order_id: &self.order_id,
            amount: self.amount,
            currency: &self.currency,
            idempotency_key: key,
            payment_method: &self.payment_method,
            api_key: &self.api_key,
            captures,
        }
    }
}

/// Retry settings.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub timeout: Duration,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
}

impl RetryPolicy {
    /// Exponential backoff with full jitter before attempt `next` (2, 3, …), at least
    /// the answer's `Retry-After`.
    pub fn delay(&self, next: u32, retry_after: Option<Duration>, rng: &mut impl Rng) -> Duration {
        let exp = self
            .backoff_base
            .saturating_mul(1u32 << (next.saturating_sub(2)).min(20));
        let ceiling = exp.min(self.backoff_cap);
        let jitter = ceiling.mul_f64(rng.random::<f64>());
        retry_after.map_or(jitter, |r| r.max(jitter))
    }
}

/// Sends rendered attempts; the goose user in a load test, a plain client in tests.
pub trait Transport {
    fn send(
        &mut self,
        template: &Template,
        attempt: Rendered,
        timeout: Duration,
    ) -> impl std::future::Future<Output = AttemptResult> + Send;
    /// Sends two attempts at once (a double click).
    fn send_pair(
        &mut self,
        template: &Template,
        a: Rendered,
        b: Rendered,
        timeout: Duration,
    ) -> impl std::future::Future<Output = (AttemptResult, AttemptResult)> + Send;
    /// Sends a flow's step other than the payment step (named `name`), once, to `base`.
    fn send_step(
        &mut self,
        _name: &str,
        _base: crate::steps::Base,
        _method: &reqwest::Method,
        _request: Rendered,
        _timeout: Duration,
    ) -> impl std::future::Future<Output = StepAnswer> + Send {
        std::future::ready(StepAnswer::Failed {
            kind: FailureKind::Other,
        })
    }
    /// The headers and body of the last successful answer to a flow's payment step (for
    /// its captures).
    fn last_answer(&mut self) -> (reqwest::header::HeaderMap, Vec<u8>) {
        Default::default()
    }
}

enum Verdict {
    Ok,
    Fail,
    Retry(Option<Duration>),
    GiveUp,
}

fn verdict(r: &AttemptResult) -> Verdict {
    match r {
        AttemptResult::Answer {
            status,
            retry_after,
            should_retry,
            ..
        } => match (*status, should_retry) {
            (200..=299, _) => Verdict::Ok,
            (_, Some(false)) if *status >= 500 || *status == 409 || *status == 429 => Verdict::GiveUp,
            (409 | 429, _) | (500..=599, _) => Verdict::Retry(*retry_after),
            (_, Some(true)) => Verdict::Retry(*retry_after),
            _ => Verdict::Fail,
        },
        AttemptResult::Failed { .. } => Verdict::Retry(None),
    }
}

/// Runs one logical payment to its outcome.
pub async fn run_checkout<T: Transport>(
    transport: &mut T,
    template: &Template,
    checkout: Checkout,
    policy: &RetryPolicy,
    rng: &mut StdRng,
    run_started: Instant,
) -> PaymentRecord {
    let started = Instant::now();
    let mut attempts: Vec<AttemptRecord> = Vec::new();
    let mut outcome = Outcome::Info;
    let mut n = 0u32;
    while n < policy.max_attempts {
        let mut key = match checkout.behaviour {
            Behaviour::RetrySameKey | Behaviour::DoubleSubmit => Some(format!("{}-k", checkout.order_id)),
            Behaviour::RetryNewKey => Some(format!("{}-k{}", checkout.order_id, n + 1)),
            Behaviour::NoKey => None,
        };
        let values = checkout.values(key.as_deref(), &checkout.captures);
        let t0 = Instant::now();
        let start_us = t0.saturating_duration_since(run_started).as_micros() as u64;
        let (first, second) = if checkout.behaviour == Behaviour::DoubleSubmit && n == 0 {
            let (a, b) = transport
                .send_pair(
                    template,
                    template.render(&values),
                    template.render(&values),
                    policy.timeout,
                )
                .await;
            (a, Some(b))
        } else {
            (
                transport.send(template, template.render(&values), policy.timeout).await,
                None,
            )
        };
        let elapsed_us = t0.elapsed().as_micros() as u64;
        let mut retry_after = None;
        let mut decided = None;
        let pair = second.is_some();
        for (i, result) in std::iter::once(first).chain(second).enumerate() {
            n += 1;
            match verdict(&result) {
                Verdict::Ok => decided = Some(Outcome::Ok),
                Verdict::Fail if decided.is_none() => decided = Some(Outcome::Fail),
                Verdict::GiveUp if decided.is_none() => decided = Some(Outcome::Info),
                Verdict::Retry(r) => retry_after = retry_after.max(r),
                _ => {}
            }
            // The attempt's last result takes the key; a double click's first gets a copy.
            let key = if pair && i == 0 { key.clone() } else { key.take() };
            attempts.push(AttemptRecord {
                n,
                key,
                start_us,
                elapsed_us,
                result,
            });
        }
        if let Some(o) = decided {
            outcome = o;
            break;
        }
        if n < policy.max_attempts {
            tokio::time::sleep(policy.delay(n + 1, retry_after, rng)).await;
        }
    }
    PaymentRecord {
        order_id: checkout.order_id,
        amount: checkout.amount,
        behaviour: checkout.behaviour,
        outcome,
        e2e_us: started.elapsed().as_micros() as u64,
        attempts,
        steps: Vec::new(),
        expect: checkout.expect,
    }
}

/// Classifies a reqwest error into what the client saw on the wire.
pub fn classify(err: &reqwest::Error) -> FailureKind {
    if err.is_timeout() {
        return FailureKind::Timeout;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionReset => return FailureKind::Reset,
                std::io::ErrorKind::ConnectionRefused => return FailureKind::Connect,
                std::io::ErrorKind::TimedOut => return FailureKind::Timeout,
                std::io::ErrorKind::UnexpectedEof => return FailureKind::Eof,
                _ => {}
            }
        }
        let text = e.to_string();
        if text.contains("connection closed before message completed") || text.contains("IncompleteMessage") {
            return FailureKind::Eof;
        }
        if text.contains("reset by peer") {
            return FailureKind::Reset;
        }
        source = e.source();
    }
    if err.is_connect() {
        FailureKind::Connect
    } else {
        FailureKind::Other
    }
}

/// Reads an answer: status, payment id from the body, replay and retry headers.
pub async fn read_answer(template: &Template, resp: reqwest::Response) -> AttemptResult {
    read_answer_keeping(template, resp, &mut None).await
}

/// [`read_answer`], keeping a 2xx answer's headers and body in `kept` when it is `Some`
/// (a flow's payment step captures from them).
pub async fn read_answer_keeping(
    template: &Template,
    resp: reqwest::Response,
    kept: &mut Option<(reqwest::header::HeaderMap, Vec<u8>)>,
) -> AttemptResult {
    let status = resp.status().as_u16();
    let keep = kept.is_some() && (200..300).contains(&status);
    let kept_headers = keep.then(|| resp.headers().clone());
    let headers = resp.headers();
    let replayed = headers
        .get("idempotent-replayed")
        .is_some_and(|v| v.as_bytes() == b"true");
    let retry_after = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(3600.0)));
    let should_retry = headers.get("stripe-should-retry").and_then(|v| match v.as_bytes() {
        b"true" => Some(true),
        b"false" => Some(false),
        _ => None,
    });
    match crate::body::read_capped(resp, crate::body::MAX_ANSWER_BYTES).await {
        Ok(None) => AttemptResult::Failed {
            kind: FailureKind::TooLarge,
        },
        Ok(Some(body)) => {
            let payment_id = template.payment_id_in(&body);
            if let Some(h) = kept_headers {
                *kept = Some((h, body));
            }
            AttemptResult::Answer {
                status,
                payment_id,
                replayed,
                retry_after,
                should_retry,
            }
        }
        Err(e) => AttemptResult::Failed { kind: classify(&e) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::collections::VecDeque;

    /// A transport that answers from a script.
    struct Script(VecDeque<AttemptResult>, Vec<Option<String>>);

    impl Transport for Script {
        async fn send(&mut self, _t: &Template, r: Rendered, _to: Duration) -> AttemptResult {
            self.1.push(r.headers.first().map(|(_, v)| v.clone()));
            self.0.pop_front().expect("scripted")
        }
        async fn send_pair(
            &mut self,
            t: &Template,
            a: Rendered,
            b: Rendered,
            to: Duration,
        ) -> (AttemptResult, AttemptResult) {
            (self.send(t, a, to).await, self.send(t, b, to).await)
        }
    }

    fn answer(status: u16, id: Option<&str>) -> AttemptResult {
        AttemptResult::Answer {
            status,
            payment_id: id.map(str::to_string),
            replayed: false,
            retry_after: None,
            should_retry: None,
        }
    }

    fn failed(kind: FailureKind) -> AttemptResult {
        AttemptResult::Failed { kind }
    }

    async fn run(behaviour: Behaviour, script: Vec<AttemptResult>) -> (PaymentRecord, Vec<Option<String>>) {
        let template = Template::load("checkout-json").unwrap();
        let checkout = Checkout {
            order_id: "r-1".into(),
            amount: 100,
            currency: "usd".into(),
            payment_method: "pm_card_visa".into(),
            api_key: "sk_test_x".into(),
            behaviour,
            captures: Vec::new(),
            expect: None,
        };
        let policy = RetryPolicy {
            max_attempts: 3,
            timeout: Duration::from_secs(1),
            backoff_base: Duration::from_millis(1),
            backoff_cap: Duration::from_millis(2),
        };
        let mut t = Script(script.into(), Vec::new());
        let mut rng = StdRng::seed_from_u64(1);
        let rec = run_checkout(&mut t, &template, checkout, &policy, &mut rng, Instant::now()).await;
        (rec, t.1)
    }

    #[tokio::test]
    async fn same_key_retries_until_a_definite_answer() {
        let (rec, keys) = run(
            Behaviour::RetrySameKey,
            vec![
                failed(FailureKind::Timeout),
                answer(503, None),
                answer(200, Some("pi_1")),
            ],
        )
        .await;
        assert_eq!(rec.outcome, Outcome::Ok);
        assert_eq!(rec.attempts.len(), 3);
        assert!(keys.iter().all(|k| k.as_deref() == Some("r-1-k")));
    }

    #[tokio::test]
    async fn new_key_clients_mint_a_key_per_attempt() {
        let (_, keys) = run(
            Behaviour::RetryNewKey,
            vec![failed(FailureKind::Eof), answer(200, Some("pi_1"))],
        )
        .await;
        assert_eq!(keys, vec![Some("r-1-k1".to_string()), Some("r-1-k2".to_string())]);
        let (_, keys) = run(Behaviour::NoKey, vec![answer(200, None)]).await;
        assert_eq!(keys, vec![None]);
    }

    #[tokio::test]
    async fn declines_are_final_and_exhaustion_is_info() {
        let (rec, _) = run(Behaviour::RetrySameKey, vec![answer(402, None)]).await;
        assert_eq!((rec.outcome, rec.attempts.len()), (Outcome::Fail, 1));
        let (rec, _) = run(
            Behaviour::RetrySameKey,
            vec![answer(500, None), answer(409, None), failed(FailureKind::Reset)],
        )
        .await;
        assert_eq!((rec.outcome, rec.attempts.len()), (Outcome::Info, 3));
    }

    #[tokio::test]
    async fn double_submit_sends_two_with_one_key() {
        let (rec, keys) = run(
            Behaviour::DoubleSubmit,
            vec![answer(409, None), answer(200, Some("pi_1"))],
        )
        .await;
        assert_eq!(rec.outcome, Outcome::Ok);
        assert_eq!(rec.attempts.len(), 2);
        assert_eq!(keys[0], keys[1]);
    }

    #[test]
    fn backoff_is_jittered_capped_and_honours_retry_after() {
        let p = RetryPolicy {
            max_attempts: 5,
            timeout: Duration::from_secs(1),
            backoff_base: Duration::from_millis(100),
            backoff_cap: Duration::from_millis(250),
        };
        let mut rng = StdRng::seed_from_u64(7);
        for next in 2..10 {
            assert!(p.delay(next, None, &mut rng) <= Duration::from_millis(250));
        }
        assert!(p.delay(2, Some(Duration::from_secs(1)), &mut rng) >= Duration::from_secs(1));
    }
}
