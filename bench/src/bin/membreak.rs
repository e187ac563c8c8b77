//! Where a stored payment's memory goes: N new payments (each with its own idempotency
//! key and order id) through the provider's pipeline in process, then each store cleared
//! in turn, the live heap counted by a counting allocator (over mimalloc, as `fauxpay
//! serve` runs) before and after each. A store's share is what clearing it freed; an
//! object several stores share (an intent held by its table, its events and its stored
//! answer) is counted where its last holder is cleared, so the order below puts the
//! stores that share objects first.
//!
//! The resident memory the loop added comes first: the allocator's blocks and pages made
//! of those bytes (mimalloc's size classes round each object up), what the benchmark's
//! memory row measures, without the HTTP path.
//!
//!   membreak [PAYMENTS]     # default 200000; the RSS growth, one JSON line per store, then the total

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, Ordering};

use fauxpay_provider::{post_in_process, ApiKey, Config, Provider};

/// mimalloc, counting the bytes live.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is to the allocator `fauxpay serve` uses.
        let p = unsafe { mimalloc::MiMalloc.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `alloc` and `dealloc`.
        let p = unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// This process's resident memory in bytes (`/proc/self/statm`, 4 KiB pages; 0 where
/// there is none).
fn resident() -> isize {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<isize>().ok()));
    pages.unwrap_or(0) * 4096
}

fn main() {
    let payments: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("PAYMENTS: a number"))
        .unwrap_or(200_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let app = Provider::new(Config::default());
        let key = ApiKey::new("sk_test_membreak");
        let rss0 = resident();
        let before = live();
        for i in 0..payments {
            let body =
                format!("amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=m{i}");
            let status = post_in_process(&app, &key, "/v1/payment_intents", Some(&format!("m{i}")), &body).await;
            assert_eq!(status, 200, "payment {i}");
        }
        let total = live() - before;
        // What the allocator's blocks and pages made of those bytes (the memory row's
        // measure, without the HTTP path).
        println!(
            "{{\"store\":\"resident (RSS growth)\",\"bytes_per_payment\":{:.0}}}",
            (resident() - rss0) as f64 / payments as f64
        );
        let per = |bytes: isize| bytes as f64 / payments as f64;
        let mut last = live();
        let mut step = |store: &str, clear: &dyn Fn()| {
            clear();
            let now = live();
            println!("{{\"store\":\"{store}\",\"bytes_per_payment\":{:.0}}}", per(last - now));
            last = now;
        };
        step("events", &|| app.payments.events.clear());
        step("idempotency keys and stored answers", &|| app.idempotency.clear());
        step("request log (bounded)", &|| app.journal.reset());
        step("attempt counters", &|| app.faults.reset());
        step("ledger", &|| app.payments.ledger.clear());
        step("charges", &|| app.payments.charges.clear());
        step("payment intents", &|| app.payments.intents.clear());
        println!(
            "{{\"store\":\"total\",\"payments\":{payments},\"bytes_per_payment\":{:.0},\"left_after_clearing\":{:.0}}}",
            per(total),
            per(live() - before)
        );
    });
}
