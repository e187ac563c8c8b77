//! A duplicate group told as a story: which requests, under which keys and faults, led
//! to the second charge, in sentences a person reads (plain text; the page escapes it).

use super::{clock, money, outcome_text, DuplicateGroup};
use crate::journal::{Outcome, RequestRecord};

/// One request of the story, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub time: String,
    pub text: String,
    /// The charge this request made, if it made one of the group's.
    pub charged: Option<String>,
    /// The client did not learn what was committed (a fault kept the answer from it).
    pub in_doubt: bool,
}

/// The story of one duplicate group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Story {
    pub headline: String,
    pub steps: Vec<Step>,
    /// Why the second charge happened, one reason a line.
    pub why: Vec<String>,
}

fn key_text(key: Option<&str>) -> String {
    match key {
        Some(k) => format!("key {k}"),
        None => "no idempotency key".to_string(),
    }
}

/// Whether the client saw something other than what was committed.
fn in_doubt(r: &RequestRecord) -> bool {
    match r.outcome {
        Outcome::Dropped | Outcome::Reset | Outcome::Hung => true,
        Outcome::Status(s) => r.committed_status.is_some_and(|c| c != s),
        Outcome::Pending => false,
    }
}

pub fn tell(group: &DuplicateGroup, requests: &[RequestRecord]) -> Story {
    let headline = format!(
        "Order {} was charged {} times: {} captured, {} too much.",
        group.correlation_id,
        group.charges.len(),
        money(group.captured_amount, &group.currency),
        money(group.extra_amount, &group.currency)
    );
    let steps: Vec<Step> = requests
        .iter()
        .map(|r| {
            let charged = group
                .charges
                .iter()
                .find(|c| c.request_id == r.request_id.as_str().to_string())
                .map(|c| c.id.clone());
            let mut text = format!(
                "{} {} with {} (attempt {})",
                r.method.as_str(),
                r.path,
                key_text(r.idempotency_key.as_ref().map(|k| k.as_str())),
                r.attempt
            );
            if let Some(f) = &r.fault {
                text.push_str(&format!(", fault {f}"));
            }
            match (&charged, r.committed_status) {
                (Some(ch), _) => text.push_str(&format!(": charged {ch}")),
                (None, Some(s)) => text.push_str(&format!(": the provider answered {s}")),
                (None, None) => text.push_str(": nothing was executed"),
            }
            if r.replayed {
                text.push_str(" (a replay of the stored answer)");
            }
            let doubt = in_doubt(r);
            text.push_str(&format!("; the client saw {}", outcome_text(r.outcome)));
            if doubt {
                text.push_str(", not what was committed");
            }
            text.push('.');
            Step {
                time: clock(r.time_ms),
                text,
                charged,
                in_doubt: doubt,
            }
        })
        .collect();
    Story {
        headline,
        why: reasons(group, requests),
        steps,
    }
}

fn reasons(group: &DuplicateGroup, requests: &[RequestRecord]) -> Vec<String> {
    let mut why = Vec::new();
    let mut keys: Vec<Option<&str>> = group.charges.iter().map(|c| c.idempotency_key.as_deref()).collect();
    keys.dedup();
    let unkeyed: Vec<&str> = group
        .charges
        .iter()
        .filter(|c| c.idempotency_key.is_none())
        .map(|c| c.id.as_str())
        .collect();
    for c in &group.charges {
        let Some(r) = requests
            .iter()
            .find(|r| r.request_id.as_str().to_string() == c.request_id)
        else {
            continue;
        };
        if in_doubt(r) {
            let fault = r.fault.as_deref().map_or(String::new(), |f| format!(" (fault {f})"));
            why.push(format!(
                "The client never learned that {} succeeded: it saw {}{fault}, so it tried again.",
                c.id,
                outcome_text(r.outcome)
            ));
        }
    }
    if !unkeyed.is_empty() {
        why.push(format!(
            "{} made without an idempotency key: the provider cannot tell a retry from a new payment.",
            if unkeyed.len() == 1 {
                format!("Charge {} was", unkeyed[0])
            } else {
                format!("Charges {} were", unkeyed.join(", "))
            }
        ));
    }
    let distinct: std::collections::BTreeSet<&str> = group
        .charges
        .iter()
        .filter_map(|c| c.idempotency_key.as_deref())
        .collect();
    if distinct.len() > 1 {
        why.push(format!(
            "The retry came with a new idempotency key ({}): to the provider a new key is a new payment, so it charged again.",
            distinct.into_iter().collect::<Vec<_>>().join(", ")
        ));
    } else if distinct.len() == 1 && unkeyed.is_empty() {
        why.push(
            "Every charge carries the same idempotency key: it had expired (key TTL) or the provider was reset before the retry."
                .to_string(),
        );
    }
    if requests.is_empty() {
        why.push(
            "The request journal no longer holds these requests (it keeps the most recent ones only).".to_string(),
        );
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::GroupCharge;
    use crate::idempotency::key::IdempotencyKey;
    use crate::resources::endpoint::Verb;
    use crate::stripe::ids::{CorrelationId, RequestId};

    fn request(key: &str, outcome: Outcome, committed: u16, fault: Option<&str>) -> RequestRecord {
        RequestRecord {
            seq: 0,
            request_id: RequestId::generate(),
            time_ms: 1_000,
            method: Verb::Post,
            path: "/v1/payment_intents".into(),
            identity: key.into(),
            attempt: 1,
            idempotency_key: Some(IdempotencyKey::parse(key).unwrap()),
            correlation_id: Some(CorrelationId::new("order-1")),
            fault: fault.map(Into::into),
            outcome,
            committed_status: Some(committed),
            replayed: false,
            object: None,
        }
    }

    fn charge(id: &str, r: &RequestRecord) -> GroupCharge {
        GroupCharge {
            id: id.into(),
            amount: 1000,
            idempotency_key: r.idempotency_key.as_ref().map(|k| k.as_str().to_string()),
            request_id: r.request_id.as_str().to_string(),
        }
    }

    #[test]
    fn a_lost_answer_then_a_new_key_is_told_as_such() {
        let first = request("k1", Outcome::Dropped, 200, Some("drop_response after_commit (rule 0)"));
        let second = request("k2", Outcome::Status(200), 200, None);
        let group = DuplicateGroup {
            correlation_id: "order-1".into(),
            captured_amount: 2000,
            extra_amount: 1000,
            currency: "usd".into(),
            charges: vec![charge("ch_a", &first), charge("ch_b", &second)],
        };
        let story = tell(&group, &[first, second]);
        assert_eq!(
            story.headline,
            "Order order-1 was charged 2 times: 20.00 usd captured, 10.00 usd too much."
        );
        assert_eq!(story.steps.len(), 2);
        assert!(story.steps[0].in_doubt);
        assert_eq!(story.steps[0].charged.as_deref(), Some("ch_a"));
        assert!(story.steps[0]
            .text
            .contains("fault drop_response after_commit (rule 0): charged ch_a"));
        assert!(story.steps[0]
            .text
            .ends_with("the client saw dropped, not what was committed."));
        assert!(!story.steps[1].in_doubt);
        assert_eq!(story.why.len(), 2, "{:?}", story.why);
        assert!(story.why[0].starts_with("The client never learned that ch_a succeeded: it saw dropped"));
        assert!(story.why[1].contains("new idempotency key (k1, k2)"));
    }

    #[test]
    fn unkeyed_charges_and_a_lost_journal_are_explained() {
        let group = DuplicateGroup {
            correlation_id: "o".into(),
            captured_amount: 2,
            extra_amount: 1,
            currency: "jpy".into(),
            charges: vec![
                GroupCharge {
                    id: "ch_1".into(),
                    amount: 1,
                    idempotency_key: None,
                    request_id: "req_x".into(),
                },
                GroupCharge {
                    id: "ch_2".into(),
                    amount: 1,
                    idempotency_key: None,
                    request_id: "req_y".into(),
                },
            ],
        };
        let story = tell(&group, &[]);
        assert_eq!(story.why.len(), 2);
        assert!(story.why[0].starts_with("Charges ch_1, ch_2 were made without an idempotency key"));
        assert!(story.why[1].contains("journal no longer holds"));
    }
}
