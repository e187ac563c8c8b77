//! The goose side: one transaction that runs one logical payment per iteration, and the
//! [`Transport`] that sends its attempts through the goose user (so goose's own metrics
//! and HTML report see every request but the second half of a double click, which goes
//! straight through the user's HTTP client).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use goose::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::client::StepAnswer;
use crate::client::{
    classify, read_answer_keeping, run_checkout, AttemptResult, Checkout, FailureKind, RetryPolicy, Transport,
};
use crate::flow::{run_browse, run_flow};
use crate::journal::Journal;
use crate::latency::Latency;
use crate::mix::Mix;
use crate::open::Dispatcher;
use crate::progress::Counters;
use crate::steps::{Base, Flow};
use crate::template::{Rendered, Template};

/// Everything the load-test tasks share: the run's setup and what the run counts.
pub struct RunState {
    pub setup: RunSetup,
    pub started: Instant,
    pub counters: Arc<Counters>,
    next: AtomicU64,
    pub attempt_latency: Mutex<Latency>,
    pub payment_latency: Mutex<Latency>,
    /// A multi-step template's steps' latencies, by name (the payment step's attempts
    /// under its name).
    pub step_latency: Mutex<std::collections::BTreeMap<String, Latency>>,
    /// With `--scenario`: each scenario's tally, in the order given.
    pub scenario_tally: Mutex<Vec<crate::scenarios::Tally>>,
}

/// What a [`RunState`] is built from (the shared strings are `Arc`s: every checkout
/// holds them).
pub struct RunSetup {
    pub run_id: String,
    pub seed: u64,
    pub template: Template,
    /// A multi-step template's flow around `template` (its payment step).
    pub flow: Option<Flow>,
    /// `--scenario`: the scenarios (one of them runs `template` and `flow`).
    pub scenarios: Option<crate::scenarios::Scenarios>,
    /// `--data`: the rows payments take.
    pub data: Option<crate::feeder::Feeder>,
    pub mix: Mix,
    pub policy: RetryPolicy,
    pub amount: (u64, u64),
    pub currency: Arc<str>,
    pub payment_method: Arc<str>,
    pub api_key: Arc<str>,
    /// The provider's base URL (a flow's provider steps are sent there).
    pub provider: Arc<str>,
    pub journal: Journal,
}

impl RunState {
    pub fn new(setup: RunSetup) -> Arc<Self> {
        let tallies = setup.scenarios.as_ref().map_or(0, |s| s.list.len());
        Arc::new(Self {
            scenario_tally: Mutex::new((0..tallies).map(|_| Default::default()).collect()),
            setup,
            started: Instant::now(),
            counters: Arc::new(Counters::default()),
            next: AtomicU64::new(0),
            attempt_latency: Mutex::new(Latency::default()),
            payment_latency: Mutex::new(Latency::default()),
            step_latency: Mutex::new(Default::default()),
        })
    }

    /// The checkout for payment number `index`, with the feeder's row `row` (in order:
    /// the row's number, from 1): a pure function of the seed and both numbers.
    pub fn checkout(&self, index: u64, row: u64, rng: &mut StdRng) -> Checkout {
        let behaviour = self.setup.mix.pick(rng.random::<f64>());
        let amount = if self.setup.amount.0 == self.setup.amount.1 {
            self.setup.amount.0
        } else {
            rng.random_range(self.setup.amount.0..=self.setup.amount.1)
        };
        let mut checkout = Checkout {
            order_id: format!("{}-{index:06}", self.setup.run_id),
            amount,
            currency: self.setup.currency.clone(),
            payment_method: self.setup.payment_method.clone(),
            api_key: self.setup.api_key.clone(),
            behaviour,
            captures: Vec::new(),
            expect: None,
        };
        if let Some(data) = &self.setup.data {
            let row = data.row(row, rng);
            if let Some(pm) = data.payment_method(row) {
                checkout.payment_method = pm.into();
            }
            if let Some(currency) = data.currency(row) {
                checkout.currency = currency.into();
            }
            checkout.amount = row.amount.unwrap_or(checkout.amount);
            checkout.expect = row.expect;
            checkout.captures = row.values.iter().cloned().map(Some).collect();
        }
        checkout
    }

    /// One goose iteration: one logical payment (or a browse flow's run), recorded.
    pub async fn run_one<T: Transport>(&self, transport: &mut T) {
        let index = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.run_numbered(transport, index).await;
    }

    /// Iteration number `index` (a payment, or with `--scenario` perhaps a browse flow),
    /// recorded; returns when it ended, and whether it was a payment.
    pub async fn run_numbered<T: Transport>(&self, transport: &mut T, index: u64) -> (Instant, bool) {
        let mut rng = StdRng::seed_from_u64(self.setup.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let scenario = self.setup.scenarios.as_ref().map(|s| {
            let i = s.pick(self.setup.seed, index);
            (i, s.list[i].browse.as_ref())
        });
        // A feeder's rows go by the iteration's number within its scenario: payment n
        // takes row n, whatever the browse runs between.
        let row = match &self.setup.scenarios {
            Some(s) if self.setup.data.is_some() => s.ordinal(self.setup.seed, index),
            _ => index,
        };
        let checkout = self.checkout(index, row, &mut rng);
        if let Some((i, Some(flow))) = scenario {
            let record = run_browse(transport, flow, checkout, &self.setup.policy, &mut rng, self.started).await;
            let ended = Instant::now();
            self.record_steps(&record.steps);
            self.tally(i, record.ok, record.e2e_us);
            self.counters.browsed.fetch_add(1, Ordering::Relaxed);
            return (ended, false);
        }
        let template = &self.setup.template;
        let record = match &self.setup.flow {
            None => {
                run_checkout(
                    transport,
                    template,
                    checkout,
                    &self.setup.policy,
                    &mut rng,
                    self.started,
                )
                .await
            }
            Some(flow) => {
                run_flow(
                    transport,
                    template,
                    flow,
                    checkout,
                    &self.setup.policy,
                    &mut rng,
                    self.started,
                )
                .await
            }
        };
        let ended = Instant::now();
        {
            let mut l = self.attempt_latency.lock().unwrap_or_else(|e| e.into_inner());
            for a in &record.attempts {
                l.record(a.elapsed_us);
            }
        }
        self.payment_latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(record.e2e_us);
        if let Some(flow) = &self.setup.flow {
            if let Some(payment) = flow.payment_step() {
                let mut steps = self.step_latency.lock().unwrap_or_else(|e| e.into_inner());
                let l = steps.entry(payment.to_string()).or_default();
                for a in &record.attempts {
                    l.record(a.elapsed_us);
                }
            }
            self.record_steps(&record.steps);
        }
        if let Some((i, None)) = scenario {
            self.tally(i, record.outcome == crate::client::Outcome::Ok, record.e2e_us);
        }
        self.counters.add(&record);
        // The journal keeps the payment for reconciliation once written.
        self.setup.journal.record(record);
        (ended, true)
    }

    /// The steps' latencies, by step name.
    fn record_steps(&self, records: &[crate::steps::StepRecord]) {
        if records.is_empty() {
            return;
        }
        let mut steps = self.step_latency.lock().unwrap_or_else(|e| e.into_inner());
        for s in records {
            match steps.get_mut(&s.name) {
                Some(l) => l.record(s.elapsed_us),
                None => steps.entry(s.name.clone()).or_default().record(s.elapsed_us),
            }
        }
    }

    fn tally(&self, scenario: usize, ok: bool, e2e_us: u64) {
        if let Some(t) = self
            .scenario_tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(scenario)
        {
            t.record(ok, e2e_us);
        }
    }

    /// The transport of one goose user.
    fn transport<'a>(&'a self, user: &'a mut GooseUser) -> GooseTransport<'a> {
        GooseTransport {
            user,
            provider: &self.setup.provider,
            last: self.setup.flow.as_ref().map(|_| Default::default()),
        }
    }

    /// The goose scenario running [`RunState::run_one`] per iteration.
    pub fn scenario(self: &Arc<Self>) -> Scenario {
        let state = self.clone();
        let transaction: TransactionFunction = Arc::new(move |user| {
            let state = state.clone();
            Box::pin(async move {
                crate::interrupt::users_started();
                let mut transport = state.transport(user);
                state.run_one(&mut transport).await;
                Ok(())
            })
        });
        scenario!("checkout").register_transaction(Transaction::new(transaction).set_name("checkout"))
    }

    /// The open model's scenario: each goose user runs one iteration that takes start
    /// times from its seat at the [`Dispatcher`] until the schedule is over (goose's own
    /// iterations and run time do not pace it).
    pub fn open_scenario(self: &Arc<Self>, dispatcher: Arc<Dispatcher>) -> Scenario {
        let state = self.clone();
        let transaction: TransactionFunction = Arc::new(move |user| {
            let (state, dispatcher) = (state.clone(), dispatcher.clone());
            Box::pin(async move {
                crate::interrupt::users_started();
                let mut transport = state.transport(user);
                let mut seat = dispatcher.seat();
                while let Some(start) = seat.next().await {
                    let (ended, paid) = state.run_numbered(&mut transport, start.index).await;
                    seat.finished(&start, ended, paid);
                }
                Ok(())
            })
        });
        scenario!("checkout").register_transaction(Transaction::new(transaction).set_name("checkouts at a rate"))
    }
}

/// goose's name for a template's method (a template holds only methods goose sends:
/// `template::sendable_method`).
fn goose_method(m: &reqwest::Method) -> GooseMethod {
    goose::goose::goose_method_from_method(m.clone()).unwrap_or(GooseMethod::Post)
}

struct GooseTransport<'a> {
    user: &'a mut GooseUser,
    /// The provider's base URL (a flow's `base = "provider"` steps).
    provider: &'a str,
    /// With a multi-step flow: the last 2xx answer to the payment step (its captures).
    last: Option<(reqwest::header::HeaderMap, Vec<u8>)>,
}

impl GooseTransport<'_> {
    fn builder(&self, template: &Template, r: Rendered, timeout: Duration) -> Option<reqwest::RequestBuilder> {
        Some(fill(self.target_request(&template.method, &r.path)?, r, timeout))
    }

    /// A request to the target, as goose's `get_request_builder` makes one (the same URL,
    /// the same method), without its string round trip: goose joins the path to its base
    /// URL, writes the result out and has reqwest parse it again, which cost ~7k
    /// instructions a request (its host parsed twice). Here the joined [`reqwest::Url`]
    /// goes to the client as it is.
    fn target_request(&self, method: &reqwest::Method, path: &str) -> Option<reqwest::RequestBuilder> {
        let url = target_url(&self.user.base_url, path)?;
        Some(self.user.client.request(method.clone(), url))
    }
}

/// Where goose sends `path`: a URL with a host as it is, anything else joined to the
/// target's base URL (goose's `build_url`).
fn target_url(base: &reqwest::Url, path: &str) -> Option<reqwest::Url> {
    match reqwest::Url::parse(path) {
        Ok(url) if url.host().is_some() => Some(url),
        _ => base.join(path).ok(),
    }
}

/// `rb` with the rendered request's body (and its content type, when it has one), its
/// headers, and `timeout`.
fn fill(mut rb: reqwest::RequestBuilder, r: Rendered, timeout: Duration) -> reqwest::RequestBuilder {
    rb = rb.timeout(timeout);
    if !r.content_type.is_empty() {
        rb = rb.header(reqwest::header::CONTENT_TYPE, r.content_type).body(r.body);
    }
    for (name, value) in r.headers {
        rb = rb.header(name, value);
    }
    rb
}

impl Transport for GooseTransport<'_> {
    async fn send(&mut self, template: &Template, r: Rendered, timeout: Duration) -> AttemptResult {
        let path = r.path.clone();
        let Some(rb) = self.builder(template, r, timeout) else {
            return AttemptResult::Failed {
                kind: FailureKind::Other,
            };
        };
        let request = GooseRequest::builder()
            .method(goose_method(&template.method))
            .path(path.as_str())
            .set_request_builder(rb)
            .build();
        match self.user.request(request).await {
            Ok(goose) => match goose.response {
                Ok(resp) => read_answer_keeping(template, resp, &mut self.last).await,
                Err(e) => AttemptResult::Failed { kind: classify(&e) },
            },
            Err(_) => AttemptResult::Failed {
                kind: FailureKind::Other,
            },
        }
    }

    async fn send_pair(
        &mut self,
        template: &Template,
        a: Rendered,
        b: Rendered,
        timeout: Duration,
    ) -> (AttemptResult, AttemptResult) {
        let Some(second) = self.builder(template, b, timeout) else {
            return (
                self.send(template, a, timeout).await,
                AttemptResult::Failed {
                    kind: FailureKind::Other,
                },
            );
        };
        // Either half may win the race for the key: the one answered 2xx is the one a
        // flow captures from.
        let mut kept = self.last.as_ref().map(|_| Default::default());
        let other = async {
            match second.send().await {
                Ok(resp) => read_answer_keeping(template, resp, &mut kept).await,
                Err(e) => AttemptResult::Failed { kind: classify(&e) },
            }
        };
        let (first, second) = tokio::join!(self.send(template, a, timeout), other);
        let first_empty = self.last.as_ref().is_some_and(|(_, body)| body.is_empty());
        if let (true, Some(kept)) = (first_empty, kept.filter(|(_, body)| !body.is_empty())) {
            self.last = Some(kept);
        }
        (first, second)
    }

    async fn send_step(
        &mut self,
        name: &str,
        base: Base,
        method: &reqwest::Method,
        r: Rendered,
        timeout: Duration,
    ) -> StepAnswer {
        let url = match base {
            Base::Target => None,
            Base::Provider => Some(format!("{}{}", self.provider.trim_end_matches('/'), r.path)),
        };
        let rb = match &url {
            Some(url) => Some(self.user.client.request(method.clone(), url)),
            None => self.target_request(method, &r.path),
        };
        let Some(rb) = rb else {
            return StepAnswer::Failed {
                kind: FailureKind::Other,
            };
        };
        let path = r.path.clone();
        let rb = fill(rb, r, timeout);
        let sent = match url {
            // The target's steps go through goose, so its metrics see them.
            None => {
                // Named by the step, so goose's metrics group a poll of per-order paths.
                let request = GooseRequest::builder()
                    .method(goose_method(method))
                    .path(path.as_str())
                    .name(name)
                    .set_request_builder(rb)
                    .build();
                match self.user.request(request).await {
                    Ok(goose) => goose.response,
                    Err(_) => {
                        return StepAnswer::Failed {
                            kind: FailureKind::Other,
                        }
                    }
                }
            }
            Some(_) => rb.send().await,
        };
        match sent {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let headers = resp.headers().clone();
                match crate::body::read_capped(resp, crate::body::MAX_ANSWER_BYTES).await {
                    Ok(Some(body)) => StepAnswer::Answer { status, headers, body },
                    Ok(None) => StepAnswer::Failed {
                        kind: FailureKind::TooLarge,
                    },
                    Err(e) => StepAnswer::Failed { kind: classify(&e) },
                }
            }
            Err(e) => StepAnswer::Failed { kind: classify(&e) },
        }
    }

    fn last_answer(&mut self) -> (reqwest::header::HeaderMap, Vec<u8>) {
        match &mut self.last {
            Some(kept) => std::mem::take(kept),
            None => Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// goose's `build_url` joined to a string, as reqwest then parses it.
    fn goose_url(base: &reqwest::Url, path: &str) -> Option<reqwest::Url> {
        let joined = match reqwest::Url::parse(path) {
            Ok(url) if url.host().is_some() => path.to_string(),
            _ => base.join(path).ok()?.to_string(),
        };
        reqwest::Url::parse(&joined).ok()
    }

    #[test]
    fn the_target_url_is_the_one_goose_would_send_to() {
        for base in [
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080/",
            "http://shop.test/api/",
        ] {
            let base = reqwest::Url::parse(base).unwrap();
            for path in [
                "/v1/payment_intents",
                "/checkout?cart=1&x=%20y",
                "/orders/o-1/pay#frag",
                "relative/path",
                "//elsewhere.test/x",
                "http://provider.test:9/v1/charges",
                "/a b/ü",
            ] {
                let ours = target_url(&base, path);
                assert_eq!(ours, goose_url(&base, path), "{base} + {path}");
                assert!(ours.is_some(), "{base} + {path}");
            }
        }
    }
}
