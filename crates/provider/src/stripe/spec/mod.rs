//! Stripe's request validation, from Stripe's own OpenAPI spec.
//!
//! `spec/stripe-openapi/spec3-subset.json` (Stripe's published spec, API version
//! 2023-08-16, trimmed to the payment resources) is embedded in the binary and compiled
//! once ([`schema::spec`]) into a compact parameter schema per endpoint: the form body
//! schema of every POST and DELETE, the `in: query` parameters of every GET.
//! [`validate::validate`] checks a request's [`Params`](crate::stripe::params::Params)
//! against its endpoint's schema before the operation runs and answers as Stripe does:
//! `parameter_unknown`, `parameter_missing`, `parameter_invalid_integer`,
//! `parameter_invalid_empty`, and `parameter_invalid` for the rest, `param` in bracket
//! notation. Nothing here knows HTTP.
//!
//! How fauxpay reads the spec where plain JSON Schema would say otherwise:
//! - **Closed objects everywhere.** The spec writes `additionalProperties: false` only on
//!   the top-level body, but Stripe refuses unknown parameters at every level
//!   (`payment_method_data[card][numbr]`), so an object with `properties` and no
//!   `additionalProperties` is closed. A schema-valued `additionalProperties` is a map
//!   (`metadata`).
//! - **`x-stripeBypassValidation`** marks what Stripe does not hold to the schema: on a
//!   string enum, the list is not exhaustive (`payment_method_data[type]=card` is valid),
//!   so the enum is not checked; on a plain string (`source`), a hash is accepted too (the
//!   legacy inline card, `source[number]=…`); on an `anyOf`, the alternatives still apply.
//! - **Empty strings** unset a parameter: `""` is accepted where a string is, and where an
//!   `anyOf` offers the `enum: [""]` alternative; elsewhere (an integer, a boolean, an enum,
//!   a hash, a list, a required parameter) it is Stripe's `parameter_invalid_empty`.
//! - **Form values are text**: an integer is `-?[0-9]+` within 64 bits, a boolean `true` or
//!   `false`; a JSON body's numbers and booleans count as the text a form would send (as
//!   the idempotency fingerprint counts them), and `null` as absent.
//! - **Lists** arrive as `a[]=x`, `a[0]=x` or a JSON array; an object whose keys are all
//!   indexes (`a[0]=x&a[2]=y`) is a list too.
//!
//! fauxpay declares its extensions ([`extensions::EXTENSIONS`]): parameters it models that
//! the public spec leaves out, grafted in with Stripe's own schema for them (or one
//! written there, for a later API version's), so that they are known, typed and listed
//! rather than silently accepted.

pub mod extensions;
pub mod schema;
pub mod validate;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod docs_table;
