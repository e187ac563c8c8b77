//! Webhook endpoints (`/v1/webhook_endpoints`): where events are delivered. The object
//! and its JSON (`object`: url, enabled events, description, metadata, disabled, and the
//! signing secret, shown only in the create answer as at Stripe), create / list /
//! retrieve / update / delete (`rules`), and the endpoints (`routes`). The endpoints of
//! `fauxpay serve --webhook URL` are ordinary ones, registered at start-up.

pub mod object;
pub mod routes;
pub mod rules;
