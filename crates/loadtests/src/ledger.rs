//! The provider's side of the story, read over its public HTTP API.
//!
//! [`fetch_ledger`] streams `GET /__fauxpay/ledger?correlation_prefix=RUN-` line by line
//! (schema version 1, see docs/ledger.md) and keeps, per order id, only what
//! reconciliation needs: the captured charges and the refunded total. The ledger is
//! never held as a whole. [`fetch_requests`] reads the provider's recent-request log, to
//! tell each anomaly's story with the faults the provider applied.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use futures_util::StreamExt;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::LoadError;

/// The ledger schema this reader understands.
pub const LEDGER_SCHEMA_VERSION: u64 = 1;

/// A captured charge, as reconciliation sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerCharge {
    pub id: String,
    pub amount: u64,
    pub payment_intent: Option<String>,
    pub idempotency_key: Option<String>,
    pub fault: Option<String>,
}

/// A map by order id, with a fast hasher (a run may have millions of orders).
pub type ByOrder<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// The run's slice of the ledger, by order id.
#[derive(Debug, Default)]
pub struct LedgerView {
    pub charges: ByOrder<Vec<LedgerCharge>>,
    pub refunded: ByOrder<u64>,
    pub records: u64,
}

/// What a ledger record moved (`kind` in the ledger schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// A captured charge.
    Charge,
    Refund,
    /// A kind this reader does not know (a newer provider): counted, otherwise ignored.
    #[serde(other)]
    Other,
}

/// One ledger line, its text borrowed from the line where it needs no unescaping.
#[derive(Deserialize)]
struct Line<'a> {
    schema_version: u64,
    #[serde(borrow)]
    id: Cow<'a, str>,
    kind: RecordKind,
    amount: u64,
    #[serde(borrow)]
    payment_intent: Option<Cow<'a, str>>,
    #[serde(borrow)]
    idempotency_key: Option<Cow<'a, str>>,
    #[serde(borrow)]
    correlation_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    fault: Option<Cow<'a, str>>,
}

impl LedgerView {
    /// Adds one JSON line of the ledger.
    pub fn add_line(&mut self, line: &[u8]) -> Result<(), String> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let l: Line = serde_json::from_slice(line).map_err(|e| format!("bad ledger line: {e}"))?;
        if l.schema_version != LEDGER_SCHEMA_VERSION {
            return Err(format!(
                "ledger schema version {} (this load generator reads {LEDGER_SCHEMA_VERSION})",
                l.schema_version
            ));
        }
        self.records += 1;
        let Some(order) = l.correlation_id else { return Ok(()) };
        match l.kind {
            RecordKind::Charge => {
                let charge = LedgerCharge {
                    id: l.id.into_owned(),
                    amount: l.amount,
                    payment_intent: l.payment_intent.map(Cow::into_owned),
                    idempotency_key: l.idempotency_key.map(Cow::into_owned),
                    fault: l.fault.map(Cow::into_owned),
                };
                match self.charges.get_mut(&*order) {
                    Some(charges) => charges.push(charge),
                    None => {
                        self.charges.insert(order.into_owned(), vec![charge]);
                    }
                }
            }
            RecordKind::Refund => match self.refunded.get_mut(&*order) {
                Some(total) => *total += l.amount,
                None => {
                    self.refunded.insert(order.into_owned(), l.amount);
                }
            },
            RecordKind::Other => {}
        }
        Ok(())
    }

    /// Adds the complete lines of a streamed chunk; an unfinished last line waits in
    /// `pending` for the next chunk (or for [`LedgerView::finish`]).
    pub fn feed(&mut self, pending: &mut Vec<u8>, chunk: &[u8]) -> Result<(), String> {
        pending.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(nl) = pending[start..].iter().position(|b| *b == b'\n') {
            self.add_line(&pending[start..start + nl])?;
            start += nl + 1;
        }
        pending.drain(..start);
        Ok(())
    }

    /// Adds what is left in `pending` once the stream has ended.
    pub fn finish(&mut self, pending: &mut Vec<u8>) -> Result<(), String> {
        let rest = std::mem::take(pending);
        self.add_line(&rest)
    }
}

fn admin(req: reqwest::RequestBuilder, token: Option<&str>) -> reqwest::RequestBuilder {
    match token {
        Some(t) => req.bearer_auth(t),
        None => req,
    }
}

/// Streams the ledger records whose correlation id starts with `prefix`.
pub async fn fetch_ledger(
    client: &reqwest::Client,
    provider: &str,
    token: Option<&str>,
    prefix: &str,
) -> Result<LedgerView, LoadError> {
    let url = format!("{}/__fauxpay/ledger", provider.trim_end_matches('/'));
    let resp = admin(client.get(&url).query(&[("correlation_prefix", prefix)]), token)
        .send()
        .await
        .map_err(|e| LoadError::Ledger(format!("{url}: {e}")))?;
    if !resp.status().is_success() {
        return Err(LoadError::Ledger(format!("{url} answered {}", resp.status())));
    }
    let mut view = LedgerView::default();
    let mut pending: Vec<u8> = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| LoadError::Ledger(format!("{url}: {e}")))?;
        view.feed(&mut pending, &chunk).map_err(LoadError::Ledger)?;
    }
    view.finish(&mut pending).map_err(LoadError::Ledger)?;
    Ok(view)
}

/// One request as the provider logged it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ProviderRequest {
    pub attempt: u32,
    pub idempotency_key: Option<String>,
    pub correlation_id: Option<String>,
    pub fault: Option<String>,
    pub outcome: RequestOutcome,
    pub committed_status: Option<u16>,
    pub object: Option<String>,
}

/// How a request ended, in the provider's request log: the status sent (`"200"`), or what
/// happened to the connection instead (`"dropped"`, `"reset"`, `"hung"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestOutcome {
    Status(u16),
    /// Closed without a response byte.
    Dropped,
    Reset,
    /// Held with no response until the hang ended or the client left.
    Hung,
    /// A word this reader does not know (a newer provider), kept as written so that one
    /// new word does not cost the whole log.
    Other(String),
}

impl RequestOutcome {
    pub fn parse(s: &str) -> Self {
        match s {
            "dropped" => Self::Dropped,
            "reset" => Self::Reset,
            "hung" => Self::Hung,
            _ => s.parse().map_or_else(|_| Self::Other(s.to_string()), Self::Status),
        }
    }

    /// True when the client got an HTTP answer.
    pub fn is_status(&self) -> bool {
        matches!(self, Self::Status(_))
    }
}

impl fmt::Display for RequestOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(code) => write!(f, "{code}"),
            Self::Dropped => f.write_str("dropped"),
            Self::Reset => f.write_str("reset"),
            Self::Hung => f.write_str("hung"),
            Self::Other(word) => f.write_str(word),
        }
    }
}

impl Serialize for RequestOutcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RequestOutcome {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Cow::<'de, str>::deserialize(d).map(|s| Self::parse(&s))
    }
}

/// The provider's recent requests for this run, by order id (best effort: the log is a
/// bounded ring, so the oldest requests of a long run are gone).
pub async fn fetch_requests(
    client: &reqwest::Client,
    provider: &str,
    token: Option<&str>,
    prefix: &str,
) -> HashMap<String, Vec<ProviderRequest>> {
    #[derive(Deserialize)]
    struct List {
        data: Vec<ProviderRequest>,
    }
    let url = format!("{}/__fauxpay/requests", provider.trim_end_matches('/'));
    let req = admin(
        client
            .get(&url)
            .query(&[("correlation_prefix", prefix), ("limit", "16384")]),
        token,
    );
    let Ok(resp) = req.send().await else {
        return HashMap::new();
    };
    let Ok(list) = crate::body::json_capped::<List>(resp, crate::body::MAX_ADMIN_BYTES).await else {
        return HashMap::new();
    };
    let mut out: HashMap<String, Vec<ProviderRequest>> = HashMap::new();
    for r in list.data {
        if let Some(c) = r.correlation_id.clone() {
            out.entry(c).or_default().push(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_aggregate_by_order() {
        let mut v = LedgerView::default();
        let charge = |id: &str, order: &str| {
            format!(
                r#"{{"schema_version":1,"seq":1,"id":"{id}","kind":"charge","amount":500,"currency":"usd","status":"succeeded","payment_intent":"pi_{id}","charge":null,"idempotency_key":"k","correlation_id":"{order}","request_id":"req_1","fault":null,"duplicate":false,"created_ms":1}}"#
            )
        };
        v.add_line(charge("ch_1", "r-1").as_bytes()).unwrap();
        v.add_line(charge("ch_2", "r-1").as_bytes()).unwrap();
        v.add_line(br#"{"schema_version":1,"id":"re_1","kind":"refund","amount":200,"payment_intent":null,"idempotency_key":null,"correlation_id":"r-1","fault":null}"#).unwrap();
        v.add_line(b"").unwrap();
        assert_eq!(v.charges["r-1"].len(), 2);
        assert_eq!(v.refunded["r-1"], 200);
        assert_eq!(v.records, 3);
        assert!(v
            .add_line(br#"{"schema_version":2,"id":"x","kind":"charge","amount":1}"#)
            .is_err());
        v.add_line(br#"{"schema_version":1,"id":"x_1","kind":"dispute","amount":7,"correlation_id":"r-1"}"#)
            .unwrap();
        assert_eq!(
            (v.charges["r-1"].len(), v.refunded["r-1"], v.records),
            (2, 200, 4),
            "unknown kinds are counted, nothing more"
        );
    }

    #[test]
    fn request_outcomes_read_and_write_the_logs_words() {
        for (word, outcome) in [
            ("200", RequestOutcome::Status(200)),
            ("503", RequestOutcome::Status(503)),
            ("dropped", RequestOutcome::Dropped),
            ("reset", RequestOutcome::Reset),
            ("hung", RequestOutcome::Hung),
            ("paused", RequestOutcome::Other("paused".into())),
        ] {
            let read: RequestOutcome = serde_json::from_str(&format!("\"{word}\"")).unwrap();
            assert_eq!(read, outcome, "{word}");
            assert_eq!(read.to_string(), word);
            assert_eq!(serde_json::to_string(&read).unwrap(), format!("\"{word}\""));
            assert_eq!(read.is_status(), word.parse::<u16>().is_ok());
        }
        let r: ProviderRequest = serde_json::from_str(
            r#"{"attempt":1,"idempotency_key":null,"correlation_id":"r-1","fault":"reset","outcome":"reset","committed_status":200,"object":null}"#,
        )
        .unwrap();
        assert_eq!(r.outcome, RequestOutcome::Reset);
    }
}
