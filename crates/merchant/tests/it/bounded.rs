//! The merchant's Stripe gateway reads the provider's answers with a cap: a provider (or
//! whatever sits at its address) answering an endless body costs the merchant at most
//! 4 MiB per answer, and the checkout ends as an unknown outcome the customer can retry,
//! instead of the merchant reading until it is out of memory.

use fauxpay_merchant::Strategy;
use fauxpay_testkit::merchant::{body, checkout, merchant, Backend};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_provider_answer_is_cut_and_the_checkout_ends_unknown() {
    let provider = fauxpay_testkit::fakes::endless_server().await;
    let m = merchant(Strategy::Naive, &provider, &Backend::Memory, |c| {
        c.provider_timeout = std::time::Duration::from_secs(5);
    })
    .await;
    let client = reqwest::Client::new();
    let before = fauxpay_testkit::fakes::resident();
    for n in 0..3 {
        let resp = checkout(
            &client,
            &m.url(),
            &body(&format!("endless-{n}"), 1500, "pm_card_visa"),
            None,
        )
        .await
        .expect("the merchant answers");
        assert!(resp.status >= 500, "not a success: {} {}", resp.status, resp.body);
    }
    let grew = fauxpay_testkit::fakes::resident().saturating_sub(before);
    assert!(
        grew < 256 << 20,
        "three endless answers grew the merchant by {grew} bytes"
    );
}
