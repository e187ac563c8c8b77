//! The API fauxpay serves under `/v1`: every Stripe resource's endpoints, in one table.
//! Adding a resource is one line in [`RESOURCES`]; the edge builds its router from
//! [`endpoints`], and the spec checks and README's parameter table read it too.

use crate::endpoint::Endpoint;
use crate::{
    charges, customers, events, payment_intents, payment_methods, refunds, setup_intents, webhook_endpoints,
};

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
];

/// Every `/v1` endpoint, in declaration order.
pub fn endpoints() -> impl Iterator<Item = &'static Endpoint> {
    RESOURCES.iter().flat_map(|r| r.iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_has_a_distinct_verb_and_path() {
        let mut seen = std::collections::HashSet::new();
        for e in endpoints() {
            assert!(e.path.starts_with("/v1/"), "{e:?}");
            assert!(seen.insert((e.verb, e.path)), "declared twice: {e:?}");
        }
        assert!(seen.len() >= 28, "{}", seen.len());
    }

    #[test]
    fn every_endpoint_has_a_schema_in_stripes_spec() {
        let spec = crate::spec::schema::spec();
        for e in endpoints() {
            assert!(
                spec.operation(e.verb, e.path).is_some(),
                "{e:?} is not in Stripe's spec"
            );
        }
    }
}
