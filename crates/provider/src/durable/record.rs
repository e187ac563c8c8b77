//! [`Record`]: one change to the provider's state, as the data dir keeps it in a frame of
//! the log file: a write's [`Commit`] in binary (postcard, borrowed strings when read
//! back: recovery reads a million of them), every other record as JSON. Logs of schema 3
//! and before hold JSON commits, which are read as they always were. Everything here is
//! plain data; recovery gives it meaning.

use serde::{Deserialize, Serialize};

use crate::state::ledger::LedgerTotals;
use crate::stripe::ids::{RequestId, Token};
use crate::stripe::params::packed::Packed;
use crate::stripe::params::{as_json, Params};

/// The first bytes of a binary commit record: no JSON starts so. The second says whether
/// its scopes' event ids after the first were derived ([`Commit::derived_event_ids`]).
const PACKED_COMMIT: [u8; 2] = [0xFA, 0x01];
/// [`PACKED_COMMIT`] of a commit whose scopes derived their event ids (schema 5).
const PACKED_COMMIT_DERIVED: [u8; 2] = [0xFA, 0x02];
/// [`Record::Reset`] as written: the only record that is a JSON string.
const RESET: &[u8] = b"\"reset\"";

/// Why a payload is not a record.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("a binary commit record that does not read: {0}")]
    Packed(String),
}

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
    #[serde(with = "request_id_text")]
    pub request_id: RequestId,
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
    /// Whether the events its request made in one scope took their ids from the first
    /// (`EventId::nth`, schema 5 on): `tokens` then holds the first's alone. False in
    /// logs written before, where each was drawn; recovery replays such a commit with
    /// every event id drawn again (`ids::with_event_ids`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub derived_event_ids: bool,
}

/// A request id as its text (`req_…`) in JSON.
mod request_id_text {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::stripe::ids::RequestId;

    pub fn serialize<S: Serializer>(id: &RequestId, s: S) -> Result<S::Ok, S::Error> {
        id.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<RequestId, D::Error> {
        let text: &str = Deserialize::deserialize(d)?;
        RequestId::parse(text).ok_or_else(|| serde::de::Error::custom(format!("not a request id: {text}")))
    }
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
    /// Whether a frame's payload of `size` bytes starting with `prefix` (its first two
    /// bytes) can be a record: a write's binary commit (`0xFA 0x01`), a JSON object
    /// (`{"retired":…`), or the one record written as a JSON string, `"reset"`. The log's
    /// reader looks for it where a frame may begin, to tell a damaged frame from a torn
    /// tail; precise, so that a frame's own bytes seldom pass for the start of another.
    pub fn may_start(size: u32, prefix: [u8; 2]) -> bool {
        match prefix {
            [b'{', b'"'] | PACKED_COMMIT | PACKED_COMMIT_DERIVED => true,
            [b'"', b'r'] => size == RESET.len() as u32,
            _ => false,
        }
    }

    /// For a write's record, whether it is binary (schema 4 on) or JSON (schema 3 and
    /// before); `None` for any other record.
    pub fn commit_is_binary(payload: &[u8]) -> Option<bool> {
        if payload.starts_with(&PACKED_COMMIT) || payload.starts_with(&PACKED_COMMIT_DERIVED) {
            Some(true)
        } else {
            payload.starts_with(b"{\"commit\"").then_some(false)
        }
    }

    /// The record as this fauxpay writes it: a commit in binary, anything else as JSON.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Record::Commit(c) => c.packed(),
            other => other.to_json(),
        }
    }

    /// The record's JSON, as every record was written up to schema 3 (infallible for
    /// these types).
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads a record written by [`Record::to_bytes`] or [`Record::to_json`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, RecordError> {
        let (derived, packed) = match bytes.strip_prefix(&PACKED_COMMIT_DERIVED) {
            Some(packed) => (true, Some(packed)),
            None => (false, bytes.strip_prefix(&PACKED_COMMIT)),
        };
        match packed {
            Some(packed) => Commit::unpacked(packed, derived).map(|c| Record::Commit(Box::new(c))),
            None => Ok(serde_json::from_slice(bytes)?),
        }
    }
}

/// A [`Commit`] as a binary record holds it (postcard: varint numbers, length-prefixed
/// strings; tokens as 16 little-endian bytes each).
#[derive(Serialize, Deserialize)]
struct PackedCommit<'a> {
    at_ms: u64,
    request_id: [u64; 2],
    api_key: &'a str,
    verb: &'a str,
    endpoint: &'a str,
    path: &'a str,
    id: &'a str,
    sub: &'a str,
    #[serde(borrow)]
    params: Packed<'a>,
    #[serde(borrow)]
    idempotency_key: Option<&'a str>,
    fingerprint: &'a [u8],
    #[serde(borrow)]
    correlation_id: Option<&'a str>,
    #[serde(borrow)]
    fault: Option<&'a str>,
    #[serde(borrow)]
    decline: Option<[&'a str; 3]>,
    #[serde(borrow)]
    origin: Option<&'a str>,
    tokens: &'a [u8],
    attempt: Option<u32>,
    injected_status: Option<u16>,
    status: Option<u16>,
}

/// Tokens as 16 little-endian bytes each.
fn token_bytes(tokens: &[[u64; 2]]) -> Vec<u8> {
    tokens
        .iter()
        .flat_map(|[a, b]| a.to_le_bytes().into_iter().chain(b.to_le_bytes()))
        .collect()
}

/// [`token_bytes`] read back.
fn tokens_of(bytes: &[u8]) -> Result<Vec<[u64; 2]>, RecordError> {
    if bytes.len() % 16 != 0 {
        return Err(RecordError::Packed("tokens: not 16 bytes each".into()));
    }
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
    Ok(bytes.chunks_exact(16).map(|t| [word(&t[..8]), word(&t[8..])]).collect())
}

impl Commit {
    /// The binary record: [`PACKED_COMMIT`] (or [`PACKED_COMMIT_DERIVED`]), then the
    /// commit in postcard.
    fn packed(&self) -> Vec<u8> {
        let (fingerprint, tokens) = (token_bytes(&self.fingerprint), token_bytes(&self.tokens));
        let packed = PackedCommit {
            at_ms: self.at_ms,
            request_id: self.request_id.token().to_pair(),
            api_key: &self.api_key,
            verb: &self.verb,
            endpoint: &self.endpoint,
            path: &self.path,
            id: &self.id,
            sub: &self.sub,
            params: self.params.packed(),
            idempotency_key: self.idempotency_key.as_deref(),
            fingerprint: &fingerprint,
            correlation_id: self.correlation_id.as_deref(),
            fault: self.fault.as_deref(),
            decline: self
                .decline
                .as_ref()
                .map(|[a, b, c]| [a.as_str(), b.as_str(), c.as_str()]),
            origin: self.origin.as_deref(),
            tokens: &tokens,
            attempt: self.attempt,
            injected_status: self.injected_status,
            status: self.status,
        };
        // Infallible: every field serializes, into a growing Vec.
        let tag = match self.derived_event_ids {
            true => PACKED_COMMIT_DERIVED,
            false => PACKED_COMMIT,
        };
        postcard::to_extend(&packed, tag.to_vec()).unwrap_or_default()
    }

    /// [`Commit::packed`] read back (after its first two bytes, which said whether its
    /// event ids were `derived`), all of it.
    fn unpacked(bytes: &[u8], derived: bool) -> Result<Self, RecordError> {
        let bad = |e: postcard::Error| RecordError::Packed(e.to_string());
        let (p, rest): (PackedCommit<'_>, _) = postcard::take_from_bytes(bytes).map_err(bad)?;
        if !rest.is_empty() {
            return Err(RecordError::Packed(format!("{} bytes after the record", rest.len())));
        }
        let owned = |s: Option<&str>| s.map(str::to_owned);
        Ok(Commit {
            at_ms: p.at_ms,
            request_id: Token::from_pair(p.request_id)
                .map(RequestId::from_token)
                .ok_or_else(|| RecordError::Packed("a request id of zeros".into()))?,
            api_key: p.api_key.into(),
            verb: p.verb.into(),
            endpoint: p.endpoint.into(),
            path: p.path.into(),
            id: p.id.into(),
            sub: p.sub.into(),
            params: Params::unpacked(p.params).map_err(|e| RecordError::Packed(e.into()))?,
            idempotency_key: owned(p.idempotency_key),
            fingerprint: tokens_of(p.fingerprint)?,
            correlation_id: owned(p.correlation_id),
            fault: owned(p.fault),
            decline: p.decline.map(|d| d.map(str::to_owned)),
            origin: owned(p.origin),
            tokens: tokens_of(p.tokens)?,
            attempt: p.attempt,
            injected_status: p.injected_status,
            status: p.status,
            derived_event_ids: derived,
        })
    }
}

#[cfg(test)]
impl Commit {
    /// A write with nothing but what every write has: `POST /v1/payment_intents`, no
    /// parameters, no key (tests fill in what they are about).
    pub(crate) fn example() -> Self {
        Commit {
            at_ms: 1,
            request_id: RequestId::generate(),
            api_key: "sk_test_x".into(),
            verb: "POST".into(),
            endpoint: "/v1/payment_intents".into(),
            path: "/v1/payment_intents".into(),
            id: String::new(),
            sub: String::new(),
            params: Params::default(),
            idempotency_key: None,
            fingerprint: Vec::new(),
            correlation_id: None,
            fault: None,
            decline: None,
            origin: None,
            tokens: Vec::new(),
            attempt: None,
            injected_status: None,
            status: None,
            derived_event_ids: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_their_bytes_and_their_json() {
        let records = [
            Record::Commit(Box::new(Commit {
                at_ms: 1_764_000_000_123,
                params: Params::from_value(&serde_json::json!({"amount": "100", "metadata": {"order_id": "o1"}}))
                    .unwrap(),
                idempotency_key: Some("k1".into()),
                fingerprint: vec![[7, 8]],
                correlation_id: Some("o1".into()),
                decline: Some(["card_declined".into(), "generic_decline".into(), "no".into()]),
                tokens: vec![[1, 2], [u64::MAX, 0]],
                attempt: Some(2),
                injected_status: Some(500),
                status: Some(402),
                ..Commit::example()
            })),
            // As a fauxpay before schema 5 wrote it: every event id drawn.
            Record::Commit(Box::new(Commit {
                tokens: vec![[3, 4], [5, 6], [7, 8]],
                derived_event_ids: false,
                ..Commit::example()
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
                Record::may_start(bytes.len() as u32, [bytes[0], bytes[1]]),
                "{r:?} is recognised where a frame begins"
            );
            assert_eq!(Record::from_bytes(&bytes).unwrap(), r);
        }
    }

    /// A binary commit cut anywhere, or with any byte changed, reads as an error or as
    /// some commit: never a panic, never parameters that point outside their text.
    #[test]
    fn a_damaged_binary_commit_is_an_error_not_a_panic() {
        let commit = Commit {
            params: Params::from_form(b"amount=100&metadata[order_id]=o1&expand[]=a&expand[]=b").unwrap(),
            idempotency_key: Some("k1".into()),
            fingerprint: vec![[7, 8]],
            correlation_id: Some("o1".into()),
            tokens: vec![[1, 2]],
            attempt: Some(1),
            status: Some(200),
            ..Commit::example()
        };
        let bytes = Record::Commit(Box::new(commit)).to_bytes();
        for cut in 2..bytes.len() {
            assert!(Record::from_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in 2..bytes.len() {
            for flip in [0x01, 0x80, 0xFF] {
                let mut damaged = bytes.clone();
                damaged[at] ^= flip;
                if let Ok(Record::Commit(c)) = Record::from_bytes(&damaged) {
                    let _ = (c.params.canonical(), c.params.to_json());
                }
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Record::from_bytes(&longer).is_err(), "a byte after the record");
    }

    #[test]
    fn tokens_are_32_lower_case_hex_digits_each() {
        let id = RequestId::generate();
        let attempt = |tokens: &str| {
            let json = format!(
                r#"{{"commit":{{"at_ms":1,"request_id":"{id}","api_key":"k","verb":"POST","endpoint":"/v1/x","path":"/v1/x","id":"","params":{{}},"tokens":"{tokens}"}}}}"#
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
