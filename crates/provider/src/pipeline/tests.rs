//! The pipeline without sockets: every fault (none, each kind before and after the
//! commit) against every state of the request's idempotency key (new, stored and so
//! replayed, in flight, used with other parameters), checking what the connection is
//! told, what was charged, what the key keeps and what the request log says.

use std::time::Instant;

use serde_json::Value;

use super::*;
use crate::config::Config;
use crate::idempotency::store::Begin;
use crate::idempotency::Fingerprint;
use crate::resources::endpoints;
use crate::state::table::Cursor;
use crate::stripe::ids::ObjectId;
use crate::stripe::params::Params;

const PATH: &str = "/v1/payment_intents";

/// `POST /v1/payment_intents`, found by its verb and path (not its place in the table).
fn create() -> &'static Endpoint {
    endpoint(Verb::Post, PATH)
}

/// The endpoint served at `verb` `path`, found by both (not by its place in a table).
fn endpoint(verb: Verb, path: &str) -> &'static Endpoint {
    endpoints()
        .find(|e| e.verb == verb && e.path == path)
        .unwrap_or_else(|| panic!("{path} is served"))
}
const BODY: &str = "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=o1";
const OTHER_BODY: &str = "amount=3000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=o1";
const KEY: &str = "key-1";

fn api_key() -> ApiKey {
    ApiKey::interned("sk_test_pipeline")
}

fn request(key: Option<&str>, body: &str, fault: Option<&str>) -> Request {
    Request {
        request_id: RequestId::generate(),
        api_key: api_key(),
        verb: Verb::Post,
        path: PATH.into(),
        idempotency_key: key.map(|k| IdempotencyKey::parse(k).unwrap()),
        params: Params::from_form(body.as_bytes()).unwrap(),
        forced_fault: fault.map(str::to_string),
        origin: None,
    }
}

async fn post(app: &Arc<Provider>, body: &str, fault: Option<&str>) -> Delivery {
    run(app, request(Some(KEY), body, fault), create(), PathIds::default()).await
}

/// What the client sees of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Sent(u16),
    Replayed(u16),
    Dribbled(u16),
    Closed,
    Reset,
    Held,
}

fn seen(d: &Delivery) -> Seen {
    match d {
        Delivery::Send(a) if a.replay_of.is_some() => Seen::Replayed(a.status),
        Delivery::Send(a) => Seen::Sent(a.status),
        Delivery::Dribble(a, _) => Seen::Dribbled(a.status),
        Delivery::Abort(Abort::Close) => Seen::Closed,
        Delivery::Abort(Abort::Reset) => Seen::Reset,
        Delivery::Hold(_) => Seen::Held,
    }
}

fn charges(app: &Provider) -> u64 {
    app.payments.ledger.counts().charges
}

/// The state of the key when the request under test arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyState {
    New,
    Replay,
    InFlight,
    Mismatch,
}

/// Brings the key to `state`; a claim returned must be kept alive while testing.
async fn prepare(app: &Arc<Provider>, state: KeyState) -> Option<Claim> {
    match state {
        KeyState::New => None,
        KeyState::Replay | KeyState::Mismatch => {
            assert_eq!(seen(&post(app, BODY, None).await), Seen::Sent(200));
            None
        }
        KeyState::InFlight => {
            let params = Params::from_form(BODY.as_bytes()).unwrap();
            let key = IdempotencyKey::parse(KEY).unwrap();
            match app.idempotency.begin(
                &api_key(),
                &key,
                Fingerprint::of(PATH, "POST", PATH, &params),
                Instant::now(),
            ) {
                Begin::Proceed(claim) => Some(claim),
                _ => panic!("a new key proceeds"),
            }
        }
    }
}

/// What the key answers when the request under test arrived with no fault.
fn plain_answer(state: KeyState) -> Seen {
    match state {
        KeyState::New => Seen::Sent(200),
        KeyState::Replay => Seen::Replayed(200),
        KeyState::InFlight => Seen::Sent(409),
        KeyState::Mismatch => Seen::Sent(400),
    }
}

const STATES: [KeyState; 4] = [KeyState::New, KeyState::Replay, KeyState::InFlight, KeyState::Mismatch];

/// Faults acting before the commit, and what the client sees: the same in every key
/// state, and nothing is ever charged.
const BEFORE_COMMIT: [(&str, Seen); 5] = [
    ("drop_response", Seen::Closed),
    ("reset", Seen::Reset),
    ("hang; hang=30s", Seen::Held),
    ("error; status=503", Seen::Sent(503)),
    ("rate_limit; retry_after=2s", Seen::Sent(429)),
];

#[tokio::test]
async fn faults_before_the_commit_charge_nothing_in_any_key_state() {
    for state in STATES {
        for (fault, expected) in BEFORE_COMMIT {
            let app = Provider::new(Config::default());
            let claim = prepare(&app, state).await;
            let before = charges(&app);
            let delivery = post(
                &app,
                if state == KeyState::Mismatch { OTHER_BODY } else { BODY },
                Some(fault),
            )
            .await;
            assert_eq!(seen(&delivery), expected, "{fault} with a {state:?} key");
            assert_eq!(charges(&app), before, "{fault} with a {state:?} key charged");
            let log = app.journal.recent(1, |_| true);
            assert_eq!(log[0].committed_status, None, "{fault} with a {state:?} key");
            assert!(!log[0].replayed, "{fault} with a {state:?} key");
            drop(delivery);
            drop(claim);
            // The key is as it was: new keys are free again, stored ones still replay.
            let next = seen(&post(&app, BODY, None).await);
            let after = if state == KeyState::New || state == KeyState::InFlight {
                Seen::Sent(200)
            } else {
                Seen::Replayed(200)
            };
            assert_eq!(next, after, "retry after {fault} with a {state:?} key");
        }
    }
}

#[tokio::test]
async fn a_hang_before_the_commit_keeps_the_key_in_flight_until_the_hold_ends() {
    let app = Provider::new(Config::default());
    let held = post(&app, BODY, Some("hang; hang=30s")).await;
    assert_eq!(seen(&held), Seen::Held);
    assert_eq!(app.metrics.in_flight.get(), 1, "a held request is in flight");
    assert_eq!(seen(&post(&app, BODY, None).await), Seen::Sent(409));
    drop(held);
    assert_eq!(app.metrics.in_flight.get(), 0);
    assert_eq!(seen(&post(&app, BODY, None).await), Seen::Sent(200));
    assert_eq!(charges(&app), 1);
}

/// Faults acting after the commit: what the client sees, given what it would have seen.
fn after_commit(fault: &str, plain: Seen) -> Seen {
    match fault {
        "drop_response; when=after_commit" => Seen::Closed,
        "reset; when=after_commit" => Seen::Reset,
        "hang; hang=30s; when=after_commit" => Seen::Held,
        "error; status=503; when=after_commit" => Seen::Sent(503),
        "slow_body; duration=1s" => match plain {
            Seen::Sent(s) | Seen::Replayed(s) => Seen::Dribbled(s),
            other => other,
        },
        _ => plain,
    }
}

const AFTER_COMMIT: [&str; 6] = [
    "",
    "drop_response; when=after_commit",
    "reset; when=after_commit",
    "hang; hang=30s; when=after_commit",
    "error; status=503; when=after_commit",
    "slow_body; duration=1s",
];

#[tokio::test]
async fn faults_after_the_commit_act_on_what_the_key_answers() {
    for state in STATES {
        for fault in AFTER_COMMIT {
            let app = Provider::new(Config::default());
            let claim = prepare(&app, state).await;
            let before = charges(&app);
            let body = if state == KeyState::Mismatch { OTHER_BODY } else { BODY };
            let delivery = post(&app, body, (!fault.is_empty()).then_some(fault)).await;
            let plain = plain_answer(state);
            assert_eq!(
                seen(&delivery),
                after_commit(fault, plain),
                "'{fault}' with a {state:?} key"
            );
            // Only a new key charges, whatever happens to the answer after the commit.
            let charged = u64::from(state == KeyState::New);
            assert_eq!(charges(&app), before + charged, "'{fault}' with a {state:?} key");
            let log = &app.journal.recent(1, |_| true)[0];
            let committed = match plain {
                Seen::Sent(s) | Seen::Replayed(s) => s,
                _ => unreachable!(),
            };
            assert_eq!(log.committed_status, Some(committed), "'{fault}' with a {state:?} key");
            assert_eq!(
                log.replayed,
                state == KeyState::Replay,
                "'{fault}' with a {state:?} key"
            );
            drop(delivery);
            drop(claim);
            // What the key stores: the first answer, or the 5xx that replaced it.
            let retry = seen(&post(&app, BODY, None).await);
            let stored = match (state, fault) {
                (KeyState::New, "error; status=503; when=after_commit") => Seen::Replayed(503),
                (KeyState::InFlight, _) => Seen::Sent(200),
                _ => Seen::Replayed(200),
            };
            assert_eq!(retry, stored, "retry after '{fault}' with a {state:?} key");
        }
    }
}

#[tokio::test]
async fn the_request_log_says_how_each_request_ended() {
    let app = Provider::new(Config::default());
    let cases = [
        ("drop_response; when=after_commit", Outcome::Dropped),
        ("reset", Outcome::Reset),
        ("hang; hang=30s", Outcome::Hung),
        ("error; status=502", Outcome::Status(502)),
        ("slow_body; duration=1s", Outcome::Status(200)),
    ];
    for (i, (fault, outcome)) in cases.into_iter().enumerate() {
        let key = format!("log-{i}");
        let _ = run(
            &app,
            request(Some(&key), BODY, Some(fault)),
            create(),
            PathIds::default(),
        )
        .await;
        let log = &app.journal.recent(1, |_| true)[0];
        assert_eq!(log.outcome, outcome, "{fault}");
        assert!(log.fault.is_some(), "{fault}");
        assert_eq!(log.idempotency_key.as_ref().map(|k| k.as_str()), Some(key.as_str()));
    }
}

#[tokio::test]
async fn replays_echo_the_key_and_name_the_original_request() {
    let app = Provider::new(Config::default());
    let first = request(Some(KEY), BODY, None);
    let original = first.request_id;
    let Delivery::Send(a) = run(&app, first, create(), PathIds::default()).await else {
        panic!("sent")
    };
    assert_eq!(a.echo_key.as_ref().map(|k| k.as_str()), Some(KEY));
    assert_eq!(a.replay_of, None);
    let Delivery::Send(b) = post(&app, BODY, None).await else {
        panic!("sent")
    };
    assert_eq!(b.replay_of, Some(original));
    assert_eq!(a.body, b.body, "a replay is the same bytes");
}

#[tokio::test]
async fn validation_failures_are_not_stored_and_reads_ignore_keys() {
    let app = Provider::new(Config::default());
    let Delivery::Send(bad) = post(&app, "currency=usd", None).await else {
        panic!("sent")
    };
    assert_eq!(bad.status, 400);
    assert_eq!(
        seen(&post(&app, BODY, None).await),
        Seen::Sent(200),
        "the key stayed free"
    );
    let list = endpoint(Verb::Get, PATH);
    let mut get = request(Some(KEY), "", None);
    get.verb = Verb::Get;
    let Delivery::Send(listed) = run(&app, get, list, PathIds::default()).await else {
        panic!("sent")
    };
    assert_eq!(
        (listed.status, listed.replay_of, listed.echo_key.is_none()),
        (200, None, true)
    );
}

#[tokio::test]
async fn an_invalid_forced_fault_is_a_400_naming_the_header() {
    let app = Provider::new(Config::default());
    let Delivery::Send(a) = post(&app, BODY, Some("bogus")).await else {
        panic!("sent")
    };
    assert_eq!(a.status, 400);
    let body: Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(body["error"]["param"], "Fauxpay-Fault");
    assert_eq!(charges(&app), 0);
}

#[tokio::test]
async fn a_rate_limit_says_when_to_retry() {
    let app = Provider::new(Config::default());
    let Delivery::Send(a) = post(&app, BODY, Some("rate_limit; retry_after=1500ms")).await else {
        panic!("sent")
    };
    assert_eq!((a.status, a.retry_after, a.should_retry), (429, Some(2), Some(true)));
}

#[tokio::test]
async fn a_key_is_bound_to_the_endpoint_it_was_first_used_on() {
    let app = Provider::new(Config::default());
    assert_eq!(seen(&post(&app, BODY, None).await), Seen::Sent(200));
    let charge = endpoint(Verb::Post, "/v1/charges");
    let mut other = request(Some(KEY), "amount=2000&currency=usd&source=tok_visa", None);
    other.path = "/v1/charges".into();
    let Delivery::Send(a) = run(&app, other, charge, PathIds::default()).await else {
        panic!("sent")
    };
    assert_eq!(a.status, 400);
    let body: Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(body["error"]["type"], "idempotency_error");
    assert_eq!(
        body["error"]["message"],
        "Keys for idempotent requests can only be used for the same endpoint they were first used for ('/v1/payment_intents' vs '/v1/charges'). Try using a key other than 'key-1' if you meant to execute a different request."
    );
    assert_eq!(charges(&app), 1, "nothing charged on the second endpoint");
}

/// A confirmed create's three events are made by one request: they share one allocation
/// and one row of the events table.
#[tokio::test]
async fn a_confirmed_creates_events_share_one_allocation() {
    let app = Provider::new(Config::default());
    assert_eq!(seen(&post(&app, BODY, None).await), Seen::Sent(200));
    let page = app.payments.events.table.page(Cursor::Start, 10, |_| true);
    let kinds: Vec<&str> = page.items.iter().map(|e| e.kind().as_str()).collect();
    assert_eq!(
        kinds,
        ["payment_intent.succeeded", "charge.succeeded", "payment_intent.created"]
    );
    let batch = page.items[0].batch();
    assert_eq!(batch.event_count(), 3);
    assert!(page.items.iter().all(|e| e.batch().same(batch)));
    assert_eq!(app.payments.events.table.rows(), 1);
}

/// Two workers make payments, each in its own part of the shards (`state::shard`), and
/// every intent and charge is found from another thread, by id and in the lists.
#[test]
fn payments_made_on_two_workers_are_found_from_any_thread() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let app = Provider::new(Config::default());
    runtime.block_on(async {
        let tasks: Vec<_> = (0..2)
            .map(|t| {
                let app = app.clone();
                tokio::spawn(async move {
                    let key = ApiKey::new("sk_test_two_workers");
                    for i in 0..100 {
                        let body = format!(
                            "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=t{t}-{i}"
                        );
                        let status = direct::post(&app, &key, PATH, Some(&format!("t{t}-{i}")), &body).await;
                        assert_eq!(status, 200, "payment t{t}-{i}");
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    // Read from this thread, which made none of them.
    let intents = app.payments.intents.page(Cursor::Start, 1_000, |_| true).items;
    assert_eq!(intents.len(), 200);
    for pi in &intents {
        let found = app.payments.intents.get(&pi.id).expect("the intent, by its id");
        let charge = found.latest_charge.expect("a confirmed intent's charge");
        assert!(app.payments.charges.get(&charge).is_some(), "{charge}, by its id");
    }
    assert_eq!(
        app.payments.charges.page(Cursor::Start, 1_000, |_| true).items.len(),
        200
    );
}

/// The replay lane: a keyed form body as [`form_body`] hands it to the pipeline.
fn lane_body(app: &Provider, body: &str) -> (Params, Body) {
    form_body(app, PATH, true, Bytes::copy_from_slice(body.as_bytes())).expect("a valid form")
}

/// Runs `body` with `key` through the lane as the `/v1` handler does.
async fn lane_post(app: &Arc<Provider>, key: &str, body: &str) -> (Seen, bool) {
    let (params, how) = lane_body(app, body);
    let known = matches!(how, Body::Known { .. });
    let req = Request {
        params,
        ..request(Some(key), "", None)
    };
    (
        seen(&run_body(app, req, how, create(), PathIds::default()).await),
        known,
    )
}

/// A body of its own for each test, so that no test leans on what another remembered.
fn lane_payment(order: &str, payment_method: &str) -> String {
    format!("amount=2000&currency=usd&confirm=true&payment_method={payment_method}&metadata[order_id]={order}")
}

/// A provider whose lane knows `body`: sent with `key`, then replayed once (parsed, and
/// so remembered).
async fn known_to_lane(body: &str, key: &str) -> Arc<Provider> {
    let app = Provider::new(Config::default());
    assert_eq!(lane_post(&app, key, body).await, (Seen::Sent(200), false));
    assert_eq!(
        lane_post(&app, key, body).await,
        (Seen::Replayed(200), false),
        "the first replay is parsed, and remembered"
    );
    app
}

#[tokio::test]
async fn a_byte_identical_retry_is_replayed_unparsed_once_a_replay_was_parsed() {
    let body = lane_payment("lane-replayed", "pm_card_visa");
    let app = known_to_lane(&body, "lane-k1").await;
    for _ in 0..2 {
        assert_eq!(lane_post(&app, "lane-k1", &body).await, (Seen::Replayed(200), true));
        let log = &app.journal.recent(1, |_| true)[0];
        assert!(log.replayed);
        assert_eq!(log.committed_status, Some(200));
        assert_eq!(log.correlation_id.as_ref().map(|c| c.as_str()), Some("lane-replayed"));
        assert!(log.object.is_some(), "the replayed intent is named");
    }
    assert_eq!(charges(&app), 1);
    // Other bytes under the key are parsed, and refused as another request.
    let other = lane_payment("lane-other", "pm_card_visa");
    assert_eq!(lane_post(&app, "lane-k1", &other).await, (Seen::Sent(400), false));
}

#[tokio::test]
async fn a_body_the_lane_knows_runs_parsed_when_its_key_is_free() {
    let body = lane_payment("lane-free", "pm_card_visa");
    let app = known_to_lane(&body, "lane-k2").await;
    // The same bytes under a key never used: the lane knows them, the key is free.
    assert_eq!(lane_post(&app, "lane-k3", &body).await, (Seen::Sent(200), true));
    assert_eq!(charges(&app), 2, "a new payment, charged");
    let log = &app.journal.recent(1, |_| true)[0];
    assert!(!log.replayed);
    assert_eq!(log.correlation_id.as_ref().map(|c| c.as_str()), Some("lane-free"));
    let Some(ObjectId::Intent(id)) = log.object else {
        panic!("the new intent is named: {:?}", log.object)
    };
    let intent = app.payments.intents.get(&id).expect("stored");
    assert_eq!(intent.amount, 2000, "its parameters were read");
}

#[tokio::test]
async fn a_payment_method_that_forces_a_fault_is_never_replayed_unparsed() {
    let app = Provider::new(Config::default());
    let body = lane_payment("lane-forced", "pm_fault_error_after_commit");
    assert_eq!(lane_post(&app, "lane-k4", &body).await, (Seen::Sent(500), false));
    for _ in 0..2 {
        assert_eq!(lane_post(&app, "lane-k4", &body).await, (Seen::Sent(500), false));
    }
}

#[tokio::test]
async fn the_lane_is_closed_while_the_profile_matches_on_parameters() {
    let body = lane_payment("lane-profile", "pm_card_visa");
    let app = known_to_lane(&body, "lane-k5").await;
    let (_, known) = lane_body(&app, &body);
    assert!(matches!(known, Body::Known { .. }), "known under the default profile");
    // A rule on the amount: every request's plan needs its parameters again.
    let source = "name = \"amounts\"\ndescription = \"t\"\nseed = 1\n[[rules]]\nkind = \"error\"\nstatus = 503\nprobability = 1.0\n[rules.match]\namount = 2000\n";
    let swap = || {
        app.swap_profile(
            fauxpay_faults::parse_profile_text("a test", source).unwrap(),
            source.into(),
        )
    };
    swap();
    assert_eq!(lane_post(&app, "lane-k5", &body).await, (Seen::Sent(503), false));
    // A body the lane handed over just before the swap is parsed before its plan.
    app.swap_profile(
        fauxpay_faults::parse_profile_text("a test", "name = \"n\"\ndescription = \"t\"\nseed = 1\n").unwrap(),
        String::new(),
    );
    let (params, how) = lane_body(&app, &body);
    assert!(matches!(how, Body::Known { .. }));
    swap();
    let req = Request {
        params,
        ..request(Some("lane-k5"), "", None)
    };
    assert_eq!(
        seen(&run_body(&app, req, how, create(), PathIds::default()).await),
        Seen::Sent(503)
    );
}

#[tokio::test]
async fn a_lane_replay_answers_and_logs_what_a_parsed_replay_does() {
    let app = Provider::new(Config::default());
    let body = lane_payment("lane-same", "pm_card_visa");
    lane_post(&app, "lane-k6", &body).await;
    // The first replay is parsed, the second comes through the lane.
    let mut answers = Vec::new();
    for lane in [false, true] {
        let (params, how) = lane_body(&app, &body);
        assert_eq!(matches!(how, Body::Known { .. }), lane);
        let req = Request {
            params,
            ..request(Some("lane-k6"), "", None)
        };
        let Delivery::Send(answer) = run_body(&app, req, how, create(), PathIds::default()).await else {
            panic!("a replay is sent");
        };
        let log = app.journal.recent(1, |_| true).remove(0);
        answers.push((answer, log));
    }
    let ((parsed, parsed_log), (laned, laned_log)) = (&answers[0], &answers[1]);
    assert_eq!(parsed.status, laned.status);
    assert_eq!(parsed.body, laned.body, "the same bytes");
    assert_eq!(parsed.echo_key, laned.echo_key);
    assert_eq!(parsed.replay_of, laned.replay_of);
    assert!(laned.replay_of.is_some());
    assert_eq!(
        laned_log.attempt,
        parsed_log.attempt + 1,
        "attempts are counted as before"
    );
    {
        let (a, b) = (parsed_log, laned_log);
        assert_eq!(a.identity.as_str(), b.identity.as_str());
        assert_eq!(a.correlation_id, b.correlation_id);
        assert_eq!(a.fault, b.fault);
        assert_eq!(a.outcome, b.outcome);
        assert_eq!(a.committed_status, b.committed_status);
        assert_eq!(a.replayed, b.replayed);
        assert_eq!(a.object, b.object);
    }
}

#[tokio::test]
async fn a_body_the_lane_knows_is_refused_as_a_parsed_one_would_be() {
    let body = lane_payment("lane-refused", "pm_card_visa");
    let app = known_to_lane(&body, "lane-k7").await;
    // A key used for other parameters: a mismatch.
    let other = lane_payment("lane-refused-other", "pm_card_visa");
    lane_post(&app, "lane-k8", &other).await;
    assert_eq!(lane_post(&app, "lane-k8", &body).await, (Seen::Sent(400), true));
    // A key whose first request is still in flight: 409.
    let key = IdempotencyKey::parse("lane-k9").unwrap();
    let params = Params::from_form(body.as_bytes()).unwrap();
    let Begin::Proceed(claim) = app.idempotency.begin(
        &api_key(),
        &key,
        Fingerprint::of(PATH, "POST", PATH, &params),
        Instant::now(),
    ) else {
        panic!("a new key proceeds");
    };
    assert_eq!(lane_post(&app, "lane-k9", &body).await, (Seen::Sent(409), true));
    drop(claim);
    assert_eq!(charges(&app), 2, "nothing refused was charged");
}
