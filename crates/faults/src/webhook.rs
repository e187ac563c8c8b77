//! Webhook delivery faults, where they live: the `[[webhooks]]` tables' shape
//! ([`WebhookRule`](super::WebhookRule), [`DeliveryFault`](super::DeliveryFault)) in
//! `profile`, their parsing and checks in `parse`, their deterministic decision
//! ([`FaultEngine::decide_delivery`](super::FaultEngine::decide_delivery): a pure function
//! of the profile seed, the event id, the endpoint and the attempt) in `engine`. This
//! module holds their tests.

#[cfg(test)]
mod tests;
