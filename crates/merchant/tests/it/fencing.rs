//! Fencing: a worker that stalls past its lock and its claim's lease comes back to find the
//! order moved on, and its late write changes nothing. Domain-level, with a provider
//! stand-in that stalls on command and signals its charge, and a manual clock that lets
//! the lease lapse without waiting; the store-level check runs on memory and PostgreSQL.

use fauxpay_testkit::merchant as merchant_common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fauxpay_merchant::checkout::CheckoutRequest;
use fauxpay_merchant::clock::ManualClock;
use fauxpay_merchant::fencing::{advance, Advance};
use fauxpay_merchant::gateway::{ChargeOutcome, ChargeRequest, FoundPayment, Gateway, GatewayError};
use fauxpay_merchant::idempotency_record::IdempotencyKey;
use fauxpay_merchant::idempotent::{Idempotent, IdempotentSettings};
use fauxpay_merchant::lock::MemoryLock;
use fauxpay_merchant::memory_store::MemoryStore;
use fauxpay_merchant::order::{Order, OrderStatus, PaymentIntentId, Transition};
use fauxpay_merchant::postgres_store::PostgresStore;
use fauxpay_merchant::reconciler::Reconciler;
use fauxpay_merchant::store::Store;
use fauxpay_merchant::strategy::CheckoutService;
use tokio::sync::{Notify, Semaphore};

/// A provider stand-in: the first charge commits at once (and says so through
/// [`Stalling::charged`]), then its answer is held until [`Stalling::release`]; searches
/// see the committed charge.
struct Stalling {
    committed: AtomicBool,
    held: Semaphore,
    charged: Notify,
    charges: AtomicUsize,
    searches: AtomicUsize,
}

const PI: &str = "pi_committed_by_the_stale_worker";

impl Stalling {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            committed: AtomicBool::new(false),
            held: Semaphore::new(0),
            charged: Notify::new(),
            charges: AtomicUsize::new(0),
            searches: AtomicUsize::new(0),
        })
    }

    fn release(&self) {
        self.held.add_permits(1);
    }

    /// Resolves once a charge has committed (at once if one already has).
    async fn charged(&self) {
        tokio::time::timeout(Duration::from_secs(5), self.charged.notified())
            .await
            .expect("timed out waiting for the charge");
    }
}

#[async_trait]
impl Gateway for Stalling {
    async fn charge(&self, _req: &ChargeRequest) -> ChargeOutcome {
        self.charges.fetch_add(1, Ordering::SeqCst);
        self.committed.store(true, Ordering::SeqCst);
        // A stored permit: a waiter that comes later still wakes.
        self.charged.notify_one();
        let _ = self.held.acquire().await;
        ChargeOutcome::Succeeded {
            payment_intent: PaymentIntentId::new(PI),
        }
    }

    async fn find_payments(
        &self,
        _order: &fauxpay_merchant::order::OrderId,
    ) -> Result<Vec<FoundPayment>, GatewayError> {
        self.searches.fetch_add(1, Ordering::SeqCst);
        Ok(if self.committed.load(Ordering::SeqCst) {
            vec![FoundPayment {
                payment_intent: PaymentIntentId::new(PI),
                status: "succeeded".into(),
                amount: 2000,
                currency: "usd".into(),
                created: 1,
            }]
        } else {
            Vec::new()
        })
    }
}

fn request(order: &str) -> CheckoutRequest {
    CheckoutRequest::from_json(
        format!(r#"{{"order_id":"{order}","amount":2000,"currency":"usd","payment_method":"pm_card_visa"}}"#)
            .as_bytes(),
    )
    .unwrap()
}

fn key(k: &str) -> Option<IdempotencyKey> {
    Some(IdempotencyKey::parse(k).unwrap())
}

const LEASE: Duration = Duration::from_millis(200);

fn settings() -> IdempotentSettings {
    IdempotentSettings {
        lock_ttl: LEASE,
        key_ttl: Duration::from_secs(3600),
        settle: Duration::ZERO,
    }
}

#[tokio::test]
async fn a_stale_workers_late_write_changes_nothing() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let gateway = Stalling::new();
    let clock = Arc::new(ManualClock::starting_now());
    let merchant = Arc::new(Idempotent::new(
        store.clone(),
        Arc::new(MemoryLock::with_clock(clock.clone())),
        gateway.clone(),
        clock.clone(),
        settings(),
    ));
    let req = request("fence-1");

    // Worker A claims the order, the provider commits, and A stalls (a GC pause, a slow
    // network) past its lock and its lease.
    let worker_a = {
        let (m, req) = (merchant.clone(), req.clone());
        tokio::spawn(async move { m.checkout(req, key("key-a")).await })
    };
    gateway.charged().await;
    assert_eq!(gateway.charges.load(Ordering::SeqCst), 1);
    let claimed = store.order(&req.order_id).await.unwrap().unwrap();
    assert_eq!(claimed.status, OrderStatus::Processing);
    clock.advance(LEASE + Duration::from_millis(100));

    // Worker B takes the lapsed lock, finds the lapsed claim, and reconciles by search:
    // the order is paid by A's charge, and B never charges.
    let b = merchant.checkout(req.clone(), key("key-b")).await;
    assert_eq!(b.status, 200, "{:?}", b.body);
    assert_eq!(b.body["payment_intent"], PI);
    assert_eq!(gateway.charges.load(Ordering::SeqCst), 1, "B must not charge again");
    assert!(gateway.searches.load(Ordering::SeqCst) >= 1);
    let after_b = store.order(&req.order_id).await.unwrap().unwrap();
    assert_eq!(after_b.status, OrderStatus::Paid);
    assert!(
        after_b.version > claimed.version.next(),
        "B suspected, then paid: {after_b:?}"
    );

    // A wakes up with its answer and writes under its old version: fenced.
    gateway.release();
    let a = worker_a.await.unwrap();
    assert_eq!(a.status, 200, "A answers from the order as it now is: {:?}", a.body);
    assert_eq!(a.body["payment_intent"], PI);
    let after_a = store.order(&req.order_id).await.unwrap().unwrap();
    assert_eq!(after_a, after_b, "the stale worker's write changed nothing");
    assert_eq!(gateway.charges.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_lapsed_claim_is_resolved_by_the_background_reconciler() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let gateway = Stalling::new();
    let clock = Arc::new(ManualClock::starting_now());
    let merchant = Arc::new(Idempotent::new(
        store.clone(),
        Arc::new(MemoryLock::with_clock(clock.clone())),
        gateway.clone(),
        clock.clone(),
        settings(),
    ));
    let req = request("fence-2");
    let worker = {
        let (m, req) = (merchant.clone(), req.clone());
        tokio::spawn(async move { m.checkout(req, key("k")).await })
    };
    gateway.charged().await;
    assert_eq!(gateway.charges.load(Ordering::SeqCst), 1);
    let reconciler = Reconciler::new(store.clone(), gateway.clone(), clock.clone(), Duration::ZERO);
    // Within the lease the claim is respected.
    assert_eq!(reconciler.sweep().await.unwrap().paid, 0);
    clock.advance(LEASE + Duration::from_millis(50));
    assert_eq!(reconciler.sweep().await.unwrap().paid, 1);
    let paid = store.order(&req.order_id).await.unwrap().unwrap();
    assert_eq!(paid.payment_intent.as_ref().map(|p| p.as_str()), Some(PI));
    gateway.release();
    assert_eq!(worker.await.unwrap().status, 200);
    assert_eq!(store.order(&req.order_id).await.unwrap().unwrap(), paid);
}

/// Two workers read the same version; only the first write lands, and a stale worker's
/// late decline cannot overwrite the payment.
async fn stale_versions_are_fenced(store: &dyn Store, order_id: &str) {
    let req = request(order_id);
    let order = store
        .create_order(&Order::new(
            req.order_id.clone(),
            req.amount,
            req.currency.clone(),
            req.payment_method.clone(),
            1,
        ))
        .await
        .unwrap();
    let claim = || Transition::Claim {
        payment_method: req.payment_method.clone(),
        lease_until_ms: 10,
    };
    let Advance::Applied(claimed) = advance(store, &order, claim(), 2).await.unwrap() else {
        panic!("the first claim applies")
    };
    assert_eq!(advance(store, &order, claim(), 2).await.unwrap(), Advance::Fenced);
    // The claim lapses; the reconciler suspects and pays.
    let Advance::Applied(suspect) = advance(
        store,
        &claimed,
        Transition::Suspect {
            reason: "lapsed".into(),
        },
        20,
    )
    .await
    .unwrap() else {
        panic!("suspect applies")
    };
    let pay = Transition::Pay {
        payment_intent: PaymentIntentId::new("pi_1"),
    };
    let Advance::Applied(paid) = advance(store, &suspect, pay, 21).await.unwrap() else {
        panic!("pay applies")
    };
    // The stale worker, still holding `claimed`, reports a decline.
    let late = Transition::Decline {
        decline_code: "generic_decline".into(),
        message: "late".into(),
    };
    assert_eq!(advance(store, &claimed, late, 30).await.unwrap(), Advance::Fenced);
    assert_eq!(store.order(&req.order_id).await.unwrap().unwrap(), paid);
}

#[tokio::test]
async fn stale_versions_are_fenced_in_memory() {
    stale_versions_are_fenced(&MemoryStore::new(), "fence-mem").await;
}

#[tokio::test]
async fn stale_versions_are_fenced_in_postgres() {
    merchant_common::require_postgres().await;
    let schema = merchant_common::unique_schema();
    let store = PostgresStore::connect(merchant_common::LOCAL_POSTGRES, &schema, 2, Duration::from_secs(5))
        .await
        .expect("PostgreSQL store");
    stale_versions_are_fenced(&store, "fence-pg").await;
    merchant_common::Backend::Durable {
        redis_url: String::new(),
        postgres_url: merchant_common::LOCAL_POSTGRES.into(),
        schema,
    }
    .cleanup()
    .await;
}
