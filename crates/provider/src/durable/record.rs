//! [`Record`]: one change to the provider's state, as the data dir keeps it (JSON in a
//! frame of the log file). Everything here is plain data; recovery gives it meaning.

use serde::{Deserialize, Serialize};

use crate::state::ledger::LedgerTotals;
use crate::stripe::params::{as_json, Params};

/// One change to the provider's state. Externally tagged (`{"commit":{…}}`): an
/// internally tagged enum makes serde buffer every record before reading it, which was
/// a third of recovery's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    /// A write request that ran its operation (whatever it answered).
    Commit(Box<Commit>),
    /// One more attempt of an identity the fault engine counts (an idempotency key or a
    /// correlation id) by a request that made no [`Commit`]: the next attempt's faults
    /// depend on it.
    Attempt { identity: String, n: u32, at_ms: u64 },
    /// A fault profile became active (`PUT /__fauxpay/profile`), as its source text.
    Profile { source: String },
    /// `POST /__fauxpay/reset`.
    Reset,
    /// A webhook delivery ended for good: acknowledged (`ok`) or out of retries.
    Delivered { event: String, url: String, ok: bool },
    /// `--retain`'s sweep retired what was created before `cutoff_ms` (Unix ms): recovery
    /// retires the same at the same point of the log, so that memory follows the live
    /// window while the history is replayed and the state is the one the provider had.
    Retired { cutoff_ms: u64 },
    /// What the ledger had counted at this point of the log (compaction writes it where
    /// it left writes out, so that the counts of those writes survive them): recovery
    /// sets the ledger's totals to it.
    Totals(LedgerTotals),
    /// The ledger's last sequence number before the next write (compaction writes it
    /// where it left writes out that had taken some): recovery sets it.
    Sequence { ledger: u64 },
}

/// A write request that ran its operation: enough to run it again on the same state
/// and get the same result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    /// The wall-clock time it ran at (milliseconds since the Unix epoch).
    pub at_ms: u64,
    pub request_id: String,
    pub api_key: String,
    /// `POST` or `DELETE`.
    pub verb: String,
    /// The endpoint's path pattern (`/v1/payment_intents/{id}/confirm`).
    pub endpoint: String,
    /// The request's path (part of its idempotency fingerprint).
    pub path: String,
    /// The object id from the path (empty when it has none).
    pub id: String,
    /// The second object id from the path (`/v1/charges/{id}/refunds/{sub}`), when it has one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sub: String,
    /// The parameters, as [`Params::to_json`] writes them (read back without a
    /// `serde_json::Value` between: [`as_json`]).
    #[serde(with = "as_json")]
    pub params: Params,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// With a key: the request's idempotency fingerprint (so recovery need not hash the
    /// parameters again), as 32 hex digits.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "hex_tokens")]
    pub fingerprint: Vec<[u64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// The label of the fault that acted on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// A decline a fault forced: `[code, decline_code, message]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decline: Option<[String; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// The random tokens its ids were made of, in the order drawn (as one hex string:
    /// 32 digits a token, cheaper to read back than JSON numbers).
    #[serde(with = "hex_tokens")]
    pub tokens: Vec<[u64; 2]>,
    /// The attempt number the fault engine counted for it (for its key, else its
    /// correlation id), when it counted one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// A 5xx a fault put in place of its answer after the commit (what its key replays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injected_status: Option<u16>,
    /// The status its operation answered (200, or an error's that ran), so that recovery
    /// can tell a write that now ends otherwise. Absent in logs from before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

/// `tokens` as one string of 32 hex digits per token.
mod hex_tokens {
    use serde::{Deserialize, Deserializer, Serializer};

    const DIGITS: &[u8; 16] = b"0123456789abcdef";

    /// Each byte's value as a lower-case hex digit, or 0xFF when it is not one.
    const HEX_VALUE: [u8; 256] = {
        let mut table = [0xFF; 256];
        let mut i = 0;
        while i < 16 {
            table[DIGITS[i] as usize] = i as u8;
            i += 1;
        }
        table
    };

    pub fn serialize<S: Serializer>(tokens: &[[u64; 2]], s: S) -> Result<S::Ok, S::Error> {
        let mut text = Vec::with_capacity(tokens.len() * 32);
        for n in tokens.iter().flatten() {
            text.extend((0..16).rev().map(|i| DIGITS[(n >> (i * 4)) as usize & 15]));
        }
        s.serialize_str(std::str::from_utf8(&text).unwrap_or_default())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<[u64; 2]>, D::Error> {
        let text: &str = Deserialize::deserialize(d)?;
        let bad = || serde::de::Error::custom("tokens: not 32 hex digits per token");
        if text.len() % 32 != 0 {
            return Err(bad());
        }
        // Branch-free: a record carries a dozen tokens, and a branch per digit between
        // '0'-'9' and 'a'-'f' mispredicts half the time (it was 7% of recovery's CPU).
        let number = |digits: &[u8]| {
            let (mut n, mut bad) = (0u64, 0u8);
            for &c in digits {
                let d = HEX_VALUE[usize::from(c)];
                bad |= d;
                n = n << 4 | u64::from(d & 15);
            }
            (bad & 0xF0 == 0).then_some(n)
        };
        text.as_bytes()
            .chunks_exact(32)
            .map(|t| {
                number(&t[..16])
                    .zip(number(&t[16..]))
                    .map(|(a, b)| [a, b])
                    .ok_or_else(bad)
            })
            .collect()
    }
}

impl Record {
    /// Whether a payload starting with `prefix` (its first two bytes) can be a record:
    /// a JSON object (`{"commit":…`), or the JSON string of a record without fields
    /// (`"reset"`). The log's reader looks for it where a frame may begin, to tell a
    /// damaged frame from a torn tail.
    pub fn may_start(prefix: [u8; 2]) -> bool {
        matches!(prefix, [b'{', b'"'] | [b'"', b'a'..=b'z'])
    }

    /// The record's JSON (infallible for these types).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_their_json() {
        let records = [
            Record::Commit(Box::new(Commit {
                at_ms: 1_764_000_000_123,
                request_id: "req_1".into(),
                api_key: "sk_test_x".into(),
                verb: "POST".into(),
                endpoint: "/v1/payment_intents".into(),
                path: "/v1/payment_intents".into(),
                id: String::new(),
                sub: String::new(),
                params: Params::from_value(&serde_json::json!({"amount": "100", "metadata": {"order_id": "o1"}}))
                    .unwrap(),
                idempotency_key: Some("k1".into()),
                fingerprint: vec![[7, 8]],
                correlation_id: Some("o1".into()),
                fault: None,
                decline: Some(["card_declined".into(), "generic_decline".into(), "no".into()]),
                origin: None,
                tokens: vec![[1, 2], [u64::MAX, 0]],
                attempt: Some(2),
                injected_status: Some(500),
                status: Some(402),
            })),
            Record::Attempt {
                identity: "k1".into(),
                n: 2,
                at_ms: 5,
            },
            Record::Profile {
                source: "name = \"x\"".into(),
            },
            Record::Reset,
            Record::Delivered {
                event: "evt_1".into(),
                url: "http://127.0.0.1:1/hook".into(),
                ok: true,
            },
            Record::Retired {
                cutoff_ms: 1_700_000_000_000,
            },
            Record::Totals(LedgerTotals {
                charges: 3,
                refunds: 1,
                captured: vec![("usd".into(), 1500)],
                refunded: vec![("usd".into(), 500)],
                blocked_duplicates: 1,
                retired_correlation_ids: 2,
                seq: 9,
            }),
            Record::Sequence { ledger: 7 },
        ];
        // A path with two ids (a refund updated under its charge).
        let Record::Commit(c) = &records[0] else { unreachable!() };
        let two_ids = Record::Commit(Box::new(Commit {
            endpoint: "/v1/charges/{id}/refunds/{sub}".into(),
            path: "/v1/charges/ch_1/refunds/re_1".into(),
            id: "ch_1".into(),
            sub: "re_1".into(),
            ..(**c).clone()
        }));
        for r in records.into_iter().chain([two_ids]) {
            let bytes = r.to_bytes();
            assert!(
                Record::may_start([bytes[0], bytes[1]]),
                "{r:?} is recognised where a frame begins"
            );
            assert_eq!(Record::from_bytes(&bytes).unwrap(), r);
        }
    }

    #[test]
    fn tokens_are_32_lower_case_hex_digits_each() {
        let attempt = |tokens: &str| {
            let json = format!(
                r#"{{"commit":{{"at_ms":1,"request_id":"r","api_key":"k","verb":"POST","endpoint":"/v1/x","path":"/v1/x","id":"","params":{{}},"tokens":"{tokens}"}}}}"#
            );
            Record::from_bytes(json.as_bytes()).map(|r| match r {
                Record::Commit(c) => c.tokens,
                _ => Vec::new(),
            })
        };
        let ok = "00000000000000ff0123456789abcdef";
        assert_eq!(attempt(ok).unwrap(), vec![[0xff, 0x0123_4567_89ab_cdef]]);
        assert_eq!(attempt("").unwrap(), Vec::<[u64; 2]>::new());
        for bad in [
            "00000000000000FF0123456789abcdef",
            "00000000000000fg0123456789abcdef",
            "0000000000000 ff0123456789abcdef",
            "00000000000000ff0123456789abcde",
        ] {
            assert!(attempt(bad).is_err(), "{bad} is refused");
        }
    }
}
