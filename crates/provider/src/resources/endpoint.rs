//! Endpoints as data: what a Stripe resource declares about its URLs (verb, path
//! pattern, the operation that runs), free of HTTP, so that a resource's routes live in
//! its own folder and the edge builds the router from them.

use crate::error::ApiError;
use crate::fault_injection::attempt::Attempt;
use crate::reply::Reply;
use crate::state::payments::Payments;
use crate::stripe::params::Params;

/// The HTTP verbs Stripe's API uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    Get,
    Post,
    Delete,
}

impl Verb {
    /// The verb's place among the three (GET 0, POST 1, DELETE 2), for a table by verb.
    pub fn index(self) -> usize {
        match self {
            Verb::Get => 0,
            Verb::Post => 1,
            Verb::Delete => 2,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Delete => "DELETE",
        }
    }

    /// Whether requests with this verb change state, and so honour idempotency keys
    /// (Stripe: POST only; GET and DELETE are idempotent by definition).
    pub fn is_write(self) -> bool {
        self == Verb::Post
    }
}

/// The object ids a request's path names: `id` the first (`/v1/charges/{id}`), `sub` the
/// second (`/v1/charges/{id}/refunds/{sub}`); empty where the path has none.
#[derive(Debug, Clone, Copy, Default)]
pub struct PathIds<'a> {
    pub id: &'a str,
    pub sub: &'a str,
}

/// What an operation is given: the object ids from the path (empty when the path has
/// none), the request's parameters, and the attempt it runs for.
pub struct Call<'a> {
    pub id: &'a str,
    pub sub: &'a str,
    pub params: &'a Params,
    pub attempt: &'a Attempt,
}

/// What a publishable key (`pk_test_…`, a customer's browser) may do with an endpoint,
/// as at Stripe: most endpoints refuse it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publishable {
    Refused,
    /// Allowed as with a secret key (`POST /v1/payment_methods`).
    Allowed,
    /// Allowed on an intent named by the path, with its `client_secret`; the answer
    /// shows only what Stripe shows a publishable key.
    WithClientSecret(Secured),
}

/// The objects a publishable key reaches through their `client_secret`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secured {
    PaymentIntent,
    SetupIntent,
}

/// The operation behind an endpoint.
pub type Operation = fn(&Payments, &Call<'_>) -> Result<Reply, ApiError>;

/// One endpoint: `verb path` runs `operation`.
#[derive(Clone, Copy)]
pub struct Endpoint {
    pub verb: Verb,
    /// Stripe's path, with `{id}` for the object id (e.g. `/v1/charges/{id}/capture`) and
    /// `{sub}` for a second one (`/v1/charges/{id}/refunds/{sub}`).
    pub path: &'static str,
    pub operation: Operation,
    /// The parameters fauxpay's rules read (bracket notation; inside a hash only the keys
    /// named have an effect, `metadata` is read whole). Everything else Stripe's spec lists
    /// is accepted, type-checked and ignored; docs/api.md's parameter table says which.
    pub reads: &'static [&'static str],
    /// What a publishable key may do here.
    pub publishable: Publishable,
}

impl Endpoint {
    /// The endpoint, declaring the parameters its rules read.
    pub const fn reads(self, reads: &'static [&'static str]) -> Self {
        Self { reads, ..self }
    }

    /// The endpoint, open to publishable keys as `publishable` says.
    pub const fn publishable(self, publishable: Publishable) -> Self {
        Self { publishable, ..self }
    }

    pub const fn get(path: &'static str, operation: Operation) -> Self {
        Self {
            verb: Verb::Get,
            path,
            operation,
            reads: &[],
            publishable: Publishable::Refused,
        }
    }

    pub const fn post(path: &'static str, operation: Operation) -> Self {
        Self {
            verb: Verb::Post,
            path,
            operation,
            reads: &[],
            publishable: Publishable::Refused,
        }
    }

    pub const fn delete(path: &'static str, operation: Operation) -> Self {
        Self {
            verb: Verb::Delete,
            path,
            operation,
            reads: &[],
            publishable: Publishable::Refused,
        }
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb.as_str(), self.path)
    }
}
