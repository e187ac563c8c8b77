//! Multi-step checkouts: a template whose `[[step]]`s are the requests of one logical
//! payment (a cart, the checkout, the customer's browser steps at the provider, a poll of
//! the order), with values captured from one step's answer and used by later ones.
//!
//! A [`Flow`] is compiled from the template's TOML once (`crate::steps`). One step is the
//! **payment step** (a flow without one only browses: a `--scenario` beside one that
//! pays, run by [`run_browse`]): it is the template's request, sent by [`crate::client::run_checkout`]
//! with the idempotency key, the `--mix` behaviour and the backoff, exactly as a
//! one-request template is. The other steps are sent once each (a `POST /cart` retried
//! would make another cart; retries belong on the payment step, where a key makes them
//! safe); a `poll` step repeats until its condition holds or its timeout passes. Steps
//! may wait first (`think`: fixed, or a range drawn from the payment's seeded generator)
//! and may run only if captured values match (`if`).
//!
//! The flow's outcome: no payment step reached is `fail` (nothing could be charged); a
//! payment step that ended `fail` or `info` is that; otherwise the `[outcome]` rules
//! judge what the flow captured last (`ok` when they say paid, `fail` when they say
//! failed, else `info`), or, without rules, the payment step's own `ok`. A step other
//! than a poll that gets no 2xx answer ends the flow there (a 4xx answer's captures are
//! still read: a declined authentication says why in its error).

use std::time::Instant;

use rand::rngs::StdRng;

use crate::client::StepAnswer;
use crate::client::{run_checkout, Checkout, Outcome, PaymentRecord, RetryPolicy, Transport};
use crate::steps::{Capture, Flow, Source, StepKind, StepRecord};
use crate::template::Template;

/// The captures `captures` reads from an answer's headers and body into `into`.
pub fn capture(captures: &[Capture], headers: &reqwest::header::HeaderMap, body: &[u8], into: &mut [Option<String>]) {
    if captures.is_empty() {
        return;
    }
    // A string is read where it is, without building the document; a number or a
    // boolean needs the document (built once, and only then).
    let mut json: Option<Option<serde_json::Value>> = None;
    for c in captures {
        let value = c.sources.iter().find_map(|source| match source {
            Source::Header(h) => headers.get(h).and_then(|v| v.to_str().ok()).map(str::to_string),
            Source::Json(p) => p.find_str(body).or_else(|| {
                json.get_or_insert_with(|| serde_json::from_slice(body).ok())
                    .as_ref()
                    .and_then(|j| p.lookup(j))
                    .and_then(|v| match v {
                        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => Some(v.to_string()),
                        _ => None,
                    })
            }),
        });
        if let Some(slot) = into.get_mut(usize::from(c.index)) {
            if value.is_some() {
                *slot = value;
            }
        }
    }
}

/// What a browse flow's run (a scenario without a payment step) keeps: whether it went
/// through (every step that ran answered 2xx, its `[outcome]` `ok` rule holds where
/// written and its `fail` rule does not), how long it took, and its steps.
#[derive(Debug, Clone)]
pub struct BrowseRecord {
    pub ok: bool,
    pub e2e_us: u64,
    pub steps: Vec<StepRecord>,
}

/// A flow walked to its end: the payment step's record (when it was reached), the other
/// steps', whether a step ended it early, and what it captured.
struct Walk {
    payment: Option<PaymentRecord>,
    steps: Vec<StepRecord>,
    ended_early: bool,
    captures: Vec<Option<String>>,
    e2e_us: u64,
}

impl Walk {
    /// The `[outcome]` rules on what was captured; without rules, `ok` unless a step
    /// ended the flow early.
    fn judged(&self, flow: &Flow) -> Outcome {
        match (&flow.ok, &flow.fail) {
            (None, None) if self.ended_early => Outcome::Info,
            (None, None) => Outcome::Ok,
            (ok, fail) => {
                if ok.as_ref().is_some_and(|c| c.holds(&self.captures)) {
                    Outcome::Ok
                } else if fail.as_ref().is_some_and(|c| c.holds(&self.captures)) {
                    Outcome::Fail
                } else {
                    Outcome::Info
                }
            }
        }
    }
}

/// Runs one logical payment through the flow's steps to its outcome.
#[allow(clippy::too_many_arguments)]
pub async fn run_flow<T: Transport>(
    transport: &mut T,
    template: &Template,
    flow: &Flow,
    checkout: Checkout,
    policy: &RetryPolicy,
    rng: &mut StdRng,
    run_started: Instant,
) -> PaymentRecord {
    let (order_id, amount, behaviour, expect) = (
        checkout.order_id.clone(),
        checkout.amount,
        checkout.behaviour,
        checkout.expect,
    );
    let walk = walk(transport, Some(template), flow, checkout, policy, rng, run_started).await;
    let outcome = walk.judged(flow);
    let Some(mut record) = walk.payment else {
        // Ended before the payment step: nothing could be charged.
        return PaymentRecord {
            order_id,
            amount,
            behaviour,
            outcome: Outcome::Fail,
            e2e_us: walk.e2e_us,
            attempts: Vec::new(),
            steps: walk.steps,
            expect,
        };
    };
    if record.outcome == Outcome::Ok {
        record.outcome = outcome;
    }
    record.e2e_us = walk.e2e_us;
    record.steps = walk.steps;
    record
}

/// Runs a flow without a payment step (a browse scenario) to its end.
pub async fn run_browse<T: Transport>(
    transport: &mut T,
    flow: &Flow,
    checkout: Checkout,
    policy: &RetryPolicy,
    rng: &mut StdRng,
    run_started: Instant,
) -> BrowseRecord {
    let walk = walk(transport, None, flow, checkout, policy, rng, run_started).await;
    // Every step that ran answered 2xx at last (a poll that timed out without one did
    // not), and the rules, where written, agree.
    let answered = walk
        .steps
        .iter()
        .all(|s| s.status.is_some_and(|c| (200..300).contains(&c)));
    let ok_rule = flow.ok.as_ref().is_none_or(|c| c.holds(&walk.captures));
    let fail_rule = flow.fail.as_ref().is_some_and(|c| c.holds(&walk.captures));
    BrowseRecord {
        ok: !walk.ended_early && answered && ok_rule && !fail_rule,
        e2e_us: walk.e2e_us,
        steps: walk.steps,
    }
}

/// Sends the flow's steps in order (the payment step with `template`, when there is one).
async fn walk<T: Transport>(
    transport: &mut T,
    template: Option<&Template>,
    flow: &Flow,
    mut checkout: Checkout,
    policy: &RetryPolicy,
    rng: &mut StdRng,
    run_started: Instant,
) -> Walk {
    let started = Instant::now();
    // The feeder's row comes first, then what the steps capture.
    let mut captures: Vec<Option<String>> = checkout.captures.clone();
    captures.resize(flow.names.len().max(captures.len()), None);
    let mut payment: Option<PaymentRecord> = None;
    let mut steps = Vec::new();
    let mut ended_early = false;
    for step in &flow.steps {
        // The think time is drawn for every step, so the seeded draws after it stay the
        // same; it is waited only by a step that runs.
        let think = step.think.as_ref().map(|t| t.pick(rng));
        if step.when.as_ref().is_some_and(|w| !w.holds(&captures)) {
            continue;
        }
        if step
            .needs
            .iter()
            .any(|i| captures.get(usize::from(*i)).is_none_or(|c| c.is_none()))
        {
            // A value it sends never came: nothing is sent, and the flow ends here.
            ended_early = true;
            break;
        }
        if let Some(wait) = think {
            tokio::time::sleep(wait).await;
        }
        match (&step.kind, template) {
            (StepKind::Payment, Some(template)) => {
                checkout.captures = captures.clone();
                // Nothing kept from an earlier payment's answer is read as this one's.
                transport.last_answer();
                let record = run_checkout(transport, template, checkout.clone(), policy, rng, run_started).await;
                if record.outcome == Outcome::Ok {
                    let (headers, body) = transport.last_answer();
                    capture(&step.captures, &headers, &body, &mut captures);
                }
                let stop = record.outcome != Outcome::Ok;
                payment = Some(record);
                if stop {
                    break;
                }
            }
            // A browse flow has no payment step (the plan refuses one without a template).
            (StepKind::Payment, None) => continue,
            (StepKind::Request(request), _) => {
                // tokio's clock: the poll's deadline follows paused time in tests.
                let t0 = tokio::time::Instant::now();
                let mut record = StepRecord {
                    name: step.name.clone(),
                    status: None,
                    start_us: t0.into_std().saturating_duration_since(run_started).as_micros() as u64,
                    elapsed_us: 0,
                    sends: 0,
                };
                let done = loop {
                    let values = checkout.values(None, &captures);
                    let rendered = request.template.render(&values);
                    record.sends += 1;
                    let answer = transport
                        .send_step(
                            &step.name,
                            request.base,
                            &request.template.method,
                            rendered,
                            policy.timeout,
                        )
                        .await;
                    let ok = match &answer {
                        StepAnswer::Answer { status, headers, body } => {
                            record.status = Some(*status);
                            // A definite answer (2xx or 4xx) is read, a declined 3-D
                            // Secure's error included; only a 2xx lets the flow go on.
                            if *status < 500 {
                                capture(&step.captures, headers, body, &mut captures);
                            }
                            (200..300).contains(status)
                        }
                        StepAnswer::Failed { .. } => false,
                    };
                    match &request.poll {
                        None => break ok,
                        Some(p) => {
                            if p.until.holds(&captures) {
                                break true;
                            }
                            if t0.elapsed() + p.every >= p.timeout {
                                // Timed out: the outcome rules judge what was captured.
                                break true;
                            }
                            tokio::time::sleep(p.every).await;
                        }
                    }
                };
                record.elapsed_us = t0.elapsed().as_micros() as u64;
                steps.push(record);
                if !done {
                    ended_early = true;
                    break;
                }
            }
        }
    }
    Walk {
        payment,
        steps,
        ended_early,
        captures,
        e2e_us: started.elapsed().as_micros() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::AttemptResult;
    use crate::mix::Behaviour;
    use crate::steps::{Base, Think};
    use crate::template::Rendered;
    use rand::SeedableRng;
    use std::collections::VecDeque;
    use std::time::Duration;

    const FLOW: &str = r#"
name = "shop"

[[step]]
name = "cart"
method = "POST"
path = "/cart"
format = "json"
body = '{"sku":"tee"}'
capture = { cart = "/id" }

[[step]]
name = "checkout"
payment = true
path = "/carts/{{cart}}/checkout"
format = "json"
body = '{"order_id":"{{order_id}}","card":"{{payment_method}}"}'
capture = { intent = "/payment_intent/id", status = "/payment_intent/status", order = "/order" }
[step.headers]
Idempotency-Key = "{{idempotency_key}}"

[[step]]
name = "3ds"
base = "provider"
if = { status = "requires_action" }
method = "POST"
path = "/__fauxpay/payment_intents/{{intent}}/authenticate"
format = "form"
body = "outcome=succeed"
think = "100ms..300ms"

[[step]]
name = "poll"
path = "/orders/{{order}}"
capture = { state = "/state" }
poll = { every = "200ms", timeout = "5s", until = { state = ["paid", "failed"] } }

[outcome]
ok = { state = "paid" }
fail = { state = "failed" }
"#;

    fn error(text: &str) -> String {
        crate::plan::Plan::parse("shop.toml", text).unwrap_err().to_string()
    }

    #[test]
    fn a_flow_compiles_its_steps_captures_and_rules() {
        let crate::plan::Plan { template: t, flow } = crate::plan::Plan::parse("shop.toml", FLOW).unwrap();
        let flow = flow.as_ref().unwrap();
        assert_eq!(flow.steps.len(), 4);
        // Each step's captures in name order.
        assert_eq!(flow.names, ["cart", "intent", "order", "status", "state"]);
        assert!(matches!(flow.steps[1].kind, StepKind::Payment));
        // The payment step is the template's own request, keyed, with the cart's id.
        let captures = [Some("c_9".to_string())];
        let values = crate::template::Values {
            order_id: "o-1",
            amount: 100,
            currency: "usd",
            idempotency_key: Some("k"),
            payment_method: "pm_card_visa",
            api_key: "",
            captures: &captures,
        };
        let r = t.render(&values);
        assert_eq!(r.path, "/carts/c_9/checkout");
        assert!(r.body.contains(r#""order_id":"o-1""#), "{}", r.body);
        assert!(t.sends_key());
        let StepKind::Request(poll) = &flow.steps[3].kind else {
            panic!()
        };
        assert_eq!(poll.poll.as_ref().unwrap().timeout, Duration::from_secs(5));
        // A GET step sends no content type.
        assert_eq!(poll.template.render(&values).content_type, "");
    }

    #[test]
    fn each_mistake_is_one_line_naming_the_step_and_the_field() {
        let unknown = error(&FLOW.replace("/orders/{{order}}", "/orders/{{orders}}"));
        assert!(unknown.contains("shop.toml: step 4 (poll).path"), "{unknown}");
        assert!(unknown.contains("unknown placeholder {{orders}}"), "{unknown}");
        assert!(
            unknown.contains("or a value an earlier step captures (cart, intent, order, status)"),
            "{unknown}"
        );
        let early = error(&FLOW.replace(r#"body = '{"sku":"tee"}'"#, r#"body = '{"sku":"{{intent}}"}'"#));
        assert!(early.contains("step 1 (cart).body"), "{early}");
        assert!(early.contains("{{intent}} is captured only by a later step"), "{early}");
        let no_path = error(&FLOW.replace("path = \"/cart\"\n", ""));
        assert!(no_path.contains("step 1 (cart).path: expected a path"), "{no_path}");
        let two = error(&FLOW.replace("name = \"poll\"", "name = \"poll\"\npayment = true"));
        assert!(two.contains("step 4 (poll).payment"), "{two}");
        assert!(two.contains("exactly one payment step"), "{two}");
        let none = error(&FLOW.replace("payment = true\n", ""));
        assert!(none.contains("exactly one step with payment = true"), "{none}");
        let endless = error(&FLOW.replace(r#", timeout = "5s""#, ""));
        assert!(endless.contains("step 4 (poll).poll.timeout"), "{endless}");
        assert!(endless.contains("a poll must end"), "{endless}");
        let rule = error(&FLOW.replace(r#"ok = { state = "paid" }"#, r#"ok = { stat = "paid" }"#));
        assert!(rule.contains("outcome.ok.stat"), "{rule}");
        let think = error(&FLOW.replace("100ms..300ms", "300ms..100ms"));
        assert!(think.contains("step 3 (3ds).think"), "{think}");
        // One line each.
        for e in [unknown, early, no_path, two, none, endless, rule, think] {
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    /// A transport that answers the payment step with `payment` and the other steps
    /// from `answers` by path prefix, recording what was sent.
    struct Fake {
        payment: (u16, &'static str),
        answers: Vec<(&'static str, VecDeque<(u16, &'static str)>)>,
        sent: Vec<(Base, String)>,
    }

    impl Transport for Fake {
        async fn send(&mut self, _t: &Template, r: Rendered, _to: Duration) -> AttemptResult {
            self.sent.push((Base::Target, r.path));
            AttemptResult::Answer {
                status: self.payment.0,
                payment_id: Some("pi_1".into()),
                replayed: false,
                retry_after: None,
                should_retry: None,
            }
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

        async fn send_step(
            &mut self,
            _name: &str,
            base: Base,
            _m: &reqwest::Method,
            r: Rendered,
            _to: Duration,
        ) -> StepAnswer {
            self.sent.push((base, r.path.clone()));
            let queue = self
                .answers
                .iter_mut()
                .find(|(prefix, _)| r.path.starts_with(prefix))
                .map(|(_, q)| q)
                .expect("a scripted path");
            let (status, body) = if queue.len() > 1 {
                queue.pop_front().unwrap()
            } else {
                queue[0]
            };
            StepAnswer::Answer {
                status,
                headers: Default::default(),
                body: body.as_bytes().to_vec(),
            }
        }

        fn last_answer(&mut self) -> (reqwest::header::HeaderMap, Vec<u8>) {
            (Default::default(), self.payment.1.as_bytes().to_vec())
        }
    }

    async fn run(fake: &mut Fake) -> PaymentRecord {
        let crate::plan::Plan { template: t, flow } = crate::plan::Plan::parse("shop.toml", FLOW).unwrap();
        let checkout = Checkout {
            order_id: "o-1".into(),
            amount: 100,
            currency: "usd".into(),
            payment_method: "pm_card_authenticationRequired".into(),
            api_key: "".into(),
            behaviour: Behaviour::RetrySameKey,
            captures: Vec::new(),
            expect: None,
        };
        let policy = RetryPolicy {
            max_attempts: 3,
            timeout: Duration::from_secs(1),
            backoff_base: Duration::from_millis(10),
            backoff_cap: Duration::from_millis(100),
        };
        let mut rng = StdRng::seed_from_u64(7);
        run_flow(
            fake,
            &t,
            flow.as_ref().unwrap(),
            checkout,
            &policy,
            &mut rng,
            Instant::now(),
        )
        .await
    }

    fn fake(payment: (u16, &'static str), order: Vec<(u16, &'static str)>) -> Fake {
        Fake {
            payment,
            answers: vec![
                ("/cart", VecDeque::from([(200, r#"{"id":"c_9"}"#)])),
                ("/__fauxpay/", VecDeque::from([(200, r#"{"status":"succeeded"}"#)])),
                ("/orders/", VecDeque::from(order)),
            ],
            sent: Vec::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_3ds_payment_is_authenticated_at_the_provider_and_the_order_polled_until_paid() {
        let mut f = fake(
            (
                200,
                r#"{"payment_intent":{"id":"pi_1","status":"requires_action"},"order":"ord_5"}"#,
            ),
            vec![
                (200, r#"{"state":"pending"}"#),
                (200, r#"{"state":"pending"}"#),
                (200, r#"{"state":"paid"}"#),
            ],
        );
        let record = run(&mut f).await;
        let sent: Vec<String> = f.sent.iter().map(|(b, p)| format!("{b:?} {p}")).collect();
        assert_eq!(
            sent,
            [
                "Target /cart",
                "Target /carts/c_9/checkout",
                "Provider /__fauxpay/payment_intents/pi_1/authenticate",
                "Target /orders/ord_5",
                "Target /orders/ord_5",
                "Target /orders/ord_5",
            ]
        );
        assert_eq!(record.outcome, Outcome::Ok);
        assert_eq!(record.attempts.len(), 1, "the payment step's sends");
        let polls: Vec<(&str, u32)> = record.steps.iter().map(|s| (s.name.as_str(), s.sends)).collect();
        assert_eq!(polls, [("cart", 1), ("3ds", 1), ("poll", 3)]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_outcome_is_what_the_flow_last_read() {
        // Paid at once: no 3-D Secure step; the order reads failed: fail.
        let mut f = fake(
            (
                200,
                r#"{"payment_intent":{"id":"pi_1","status":"succeeded"},"order":"ord_5"}"#,
            ),
            vec![(200, r#"{"state":"failed"}"#)],
        );
        let record = run(&mut f).await;
        assert!(!f.sent.iter().any(|(b, _)| *b == Base::Provider));
        assert_eq!(record.outcome, Outcome::Fail);
        // Never settles within the poll's timeout: info (the money may have moved).
        let mut f = fake(
            (
                200,
                r#"{"payment_intent":{"id":"pi_1","status":"succeeded"},"order":"ord_5"}"#,
            ),
            vec![(200, r#"{"state":"pending"}"#)],
        );
        let record = run(&mut f).await;
        assert_eq!(record.outcome, Outcome::Info);
        assert_eq!(record.steps.last().unwrap().sends, 25, "every 200ms for 5s");
        // A declined payment step ends the flow there.
        let mut f = fake((402, r#"{"error":{}}"#), vec![(200, r#"{"state":"paid"}"#)]);
        let record = run(&mut f).await;
        assert_eq!(record.outcome, Outcome::Fail);
        assert_eq!(f.sent.len(), 2, "the cart and the checkout, nothing after");
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_not_run_waits_no_think_and_a_missing_value_sends_nothing() {
        // Paid at once: the 3-D Secure step (with its 100-300 ms think) does not run, and
        // does not wait either.
        let mut f = fake(
            (
                200,
                r#"{"payment_intent":{"id":"pi_1","status":"succeeded"},"order":"ord_5"}"#,
            ),
            vec![(200, r#"{"state":"paid"}"#)],
        );
        let t0 = tokio::time::Instant::now();
        assert_eq!(run(&mut f).await.outcome, Outcome::Ok);
        assert!(t0.elapsed() < Duration::from_millis(100), "{:?}", t0.elapsed());
        // The cart answers without its id: the payment step, which sends it, is not sent.
        let mut f = fake((200, "{}"), vec![(200, r#"{"state":"paid"}"#)]);
        f.answers[0].1 = VecDeque::from([(200, "{}")]);
        let record = run(&mut f).await;
        assert_eq!(record.outcome, Outcome::Fail, "nothing could be charged");
        assert_eq!(f.sent.len(), 1, "only the cart: {:?}", f.sent);
        assert!(record.attempts.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_browse_flow_goes_through_only_when_every_step_answers_and_its_rules_hold() {
        const BROWSE: &str = r#"
name = "browse"
[[step]]
name = "home"
path = "/cart"
capture = { cart = "/id" }
[[step]]
name = "order"
path = "/orders/{{cart}}"
capture = { state = "/state" }
[outcome]
ok = { state = ["paid", "pending"] }
"#;
        let crate::plan::Loaded::Browses { flow, .. } = crate::plan::Plan::parse_any("b.toml", BROWSE, &[]).unwrap()
        else {
            panic!("a flow without a payment step browses")
        };
        let policy = RetryPolicy {
            max_attempts: 1,
            timeout: Duration::from_secs(1),
            backoff_base: Duration::from_millis(10),
            backoff_cap: Duration::from_millis(10),
        };
        let checkout = Checkout {
            order_id: "o-1".into(),
            amount: 100,
            currency: "usd".into(),
            payment_method: "pm_card_visa".into(),
            api_key: "".into(),
            behaviour: Behaviour::RetrySameKey,
            captures: Vec::new(),
            expect: None,
        };
        let go = |order: (u16, &'static str)| {
            let mut f = fake((200, "{}"), vec![order]);
            let flow = flow.clone();
            let checkout = checkout.clone();
            async move {
                let mut rng = StdRng::seed_from_u64(7);
                let r = run_browse(&mut f, &flow, checkout, &policy, &mut rng, Instant::now()).await;
                (r, f.sent.len())
            }
        };
        let (r, sent) = go((200, r#"{"state":"pending"}"#)).await;
        assert!(r.ok);
        assert_eq!((sent, r.steps.len()), (2, 2));
        // The rules say no: not through.
        assert!(!go((200, r#"{"state":"failed"}"#)).await.0.ok);
        // A step without a 2xx answer ends it.
        assert!(!go((404, r#"{"state":"paid"}"#)).await.0.ok);
    }

    #[test]
    fn the_same_seed_draws_the_same_think_times() {
        let think = Think {
            min: Duration::from_millis(100),
            max: Duration::from_millis(300),
        };
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..5).map(|_| think.pick(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
        assert!(draw(3).iter().all(|d| (think.min..=think.max).contains(d)));
    }
}
