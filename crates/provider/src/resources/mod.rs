//! The Stripe resources fauxpay serves under `/v1`, one folder each: its object and
//! Stripe JSON (`object`), its rules (`rules`: what each operation does to the state),
//! and its endpoints as data (`routes`). `three_ds` is 3-D Secure (when a card asks for
//! it, `next_action`, the challenge page, the authenticate endpoints); `endpoint` is what
//! an endpoint declares. This file holds the one table of every resource's endpoints:
//! adding a resource is one line in [`RESOURCES`]; the edge builds its router from
//! [`endpoints`], and the spec checks and the docs' parameter table read it too.

pub mod charges;
pub mod checkout_sessions;
pub mod client_secret;
pub mod customers;
pub mod endpoint;
pub mod events;
pub mod payment_intents;
pub mod payment_methods;
pub mod prices;
pub mod products;
pub mod refunds;
pub mod setup_intents;
pub mod three_ds;
pub mod webhook_endpoints;

use endpoint::Endpoint;

/// The Stripe resources served under `/v1`: each declares its endpoints.
pub const RESOURCES: &[&[Endpoint]] = &[
    payment_intents::routes::ENDPOINTS,
    charges::routes::ENDPOINTS,
    refunds::routes::ENDPOINTS,
    customers::routes::ENDPOINTS,
    payment_methods::routes::ENDPOINTS,
    setup_intents::routes::ENDPOINTS,
    events::routes::ENDPOINTS,
    webhook_endpoints::routes::ENDPOINTS,
    products::routes::ENDPOINTS,
    prices::routes::ENDPOINTS,
    checkout_sessions::routes::ENDPOINTS,
];

/// The resources' names as their paths say them (`payment_intents`, `charges`, …), in
/// declaration order: what a 404 lists.
pub fn names() -> Vec<&'static str> {
    RESOURCES
        .iter()
        .filter_map(|r| r.first()?.path.strip_prefix("/v1/")?.split('/').next())
        .collect()
}

/// fauxpay's own endpoints under `/__fauxpay/` that run through the request pipeline
/// like a `/v1` one (3-D Secure's authenticate, a Checkout Session's pay and lapse).
pub fn fauxpay_endpoints() -> impl Iterator<Item = &'static Endpoint> {
    three_ds::routes::ENDPOINTS
        .iter()
        .chain(checkout_sessions::routes::FAUXPAY_ENDPOINTS)
}

/// Every `/v1` endpoint, in declaration order.
pub fn endpoints() -> impl Iterator<Item = &'static Endpoint> {
    RESOURCES.iter().flat_map(|r| r.iter())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idempotency::store::EndpointTag;

    #[test]
    fn every_endpoint_has_a_distinct_verb_and_path() {
        let mut seen = std::collections::HashSet::new();
        for e in endpoints() {
            assert!(e.path.starts_with("/v1/"), "{e:?}");
            assert!(seen.insert((e.verb, e.path)), "declared twice: {e:?}");
        }
        assert!(seen.len() >= 28, "{}", seen.len());
        // A stored idempotency key names its endpoint by a 16-bit tag of its pattern.
        let patterns: std::collections::BTreeSet<&str> =
            endpoints().chain(fauxpay_endpoints()).map(|e| e.path).collect();
        let tags: std::collections::HashSet<EndpointTag> = patterns.iter().map(|p| EndpointTag::of(p)).collect();
        assert_eq!(
            tags.len(),
            patterns.len(),
            "two endpoint patterns share an idempotency tag"
        );
        let names = names();
        assert_eq!(names.len(), RESOURCES.len());
        assert!(
            names.contains(&"events") && names.contains(&"webhook_endpoints"),
            "{names:?}"
        );
    }

    #[test]
    fn every_endpoint_has_a_schema_in_stripes_spec() {
        let spec = crate::stripe::spec::schema::spec();
        for e in endpoints() {
            assert!(
                spec.operation(e.verb, e.path).is_some(),
                "{e:?} is not in Stripe's spec"
            );
        }
    }
}
