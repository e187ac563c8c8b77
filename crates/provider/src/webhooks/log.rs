//! The delivery log (`GET /__fauxpay/webhooks`): one record per delivery attempt (and
//! per extra copy a `duplicate` fault sent), newest kept, oldest dropped past
//! [`LOG_CAPACITY`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;

use crate::stripe::ids::{EventId, WebhookEndpointId};

/// Delivery attempts kept in the log.
pub const LOG_CAPACITY: usize = 16_384;

/// How a delivery attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A 2xx within the timeout.
    Delivered,
    /// Any other status.
    Rejected,
    /// No answer within the timeout.
    Timeout,
    /// The connection failed.
    Error,
    /// Not sent (`drop` fault).
    Dropped,
    /// Sent and answered, the answer treated as lost (`lose_ack` fault).
    AckLost,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::Rejected => "rejected",
            Outcome::Timeout => "timeout",
            Outcome::Error => "error",
            Outcome::Dropped => "dropped",
            Outcome::AckLost => "ack_lost",
        }
    }
}

/// One delivery attempt.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryRecord {
    pub seq: u64,
    /// When it was sent (Unix milliseconds).
    pub time_ms: u64,
    pub event: EventId,
    #[serde(rename = "type")]
    pub event_type: &'static str,
    pub endpoint: WebhookEndpointId,
    pub url: Arc<str>,
    /// 1 for the first delivery of the event to the endpoint.
    pub attempt: u32,
    /// The extra copy a `duplicate` fault sent (2, 3, …); `None` for the attempt itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy: Option<u32>,
    /// A resend asked for with `POST /__fauxpay/webhooks/resend`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub resend: bool,
    pub result: Outcome,
    /// The HTTP status answered, if any.
    pub status: Option<u16>,
    pub error: Option<String>,
    /// From sending to the answer, when something was sent.
    pub latency_ms: Option<f64>,
    /// The delivery fault applied (`duplicate ×2 (webhook rule 0)`, …).
    pub fault: Option<Arc<str>>,
    /// When another attempt follows: the wait before it.
    pub retry_in_ms: Option<u64>,
    /// The last attempt failed and no retry is left: the event is listed as failed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub gave_up: bool,
}

/// The most recent delivery records.
#[derive(Default)]
pub struct DeliveryLog {
    records: Mutex<VecDeque<DeliveryRecord>>,
    seq: AtomicU64,
}

impl DeliveryLog {
    pub fn push(&self, mut record: DeliveryRecord) {
        record.seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let mut records = self.records.lock();
        if records.len() == LOG_CAPACITY {
            records.pop_front();
        }
        records.push_back(record);
    }

    /// Up to `limit` records `keep` accepts, newest first.
    pub fn recent(&self, limit: usize, keep: impl Fn(&DeliveryRecord) -> bool) -> Vec<DeliveryRecord> {
        let records = self.records.lock();
        records.iter().rev().filter(|r| keep(r)).take(limit).cloned().collect()
    }

    pub fn clear(&self) {
        self.records.lock().clear();
    }
}
