//! The attempt: what the domain layer knows about the request an operation runs for.
//!
//! An [`Attempt`] carries the request id and idempotency key that the ledger records
//! with every money movement, the label of the fault injected into the request (so a
//! double charge can be explained after the fact), and a forced decline when a fault
//! profile chose one in place of the card's own outcome. It also carries the origin
//! the client reached fauxpay at (`http://` and its `Host`), so that a URL fauxpay
//! hands out (a 3-D Secure page) points back at fauxpay as the client sees it.

use std::sync::Arc;

use crate::idempotency::key::IdempotencyKey;
use crate::stripe::cards::Decline;
use crate::stripe::ids::{CorrelationId, RequestId};

#[derive(Debug, Clone)]
pub struct Attempt {
    pub request_id: RequestId,
    pub idempotency_key: Option<IdempotencyKey>,
    /// The request's correlation id, when already read from its parameters (the
    /// operation reads it itself otherwise).
    pub correlation_id: Option<CorrelationId>,
    /// The fault applied to the request, if any (e.g. `drop_response after_commit (rule 0)`).
    pub fault: Option<Arc<str>>,
    /// A decline forced by a fault, overriding the card's outcome.
    pub decline: Option<Decline>,
    /// `http://{Host}` of the request, when it had a well-formed `Host`.
    pub origin: Option<Arc<str>>,
}

impl Attempt {
    /// An attempt with no fault acting on it.
    pub fn plain(request_id: RequestId, idempotency_key: Option<IdempotencyKey>) -> Self {
        Self {
            request_id,
            idempotency_key,
            correlation_id: None,
            fault: None,
            decline: None,
            origin: None,
        }
    }
}
