//! What the Stripe objects' JSON shares: metadata, `now_unix`, the `null` and
//! prefixed-token fields, the salts of tokens derived from ids, and the hand-written
//! JSON writer of the hot path.
//!
//! Each object serialises to the JSON Stripe returns for it, with the same field names,
//! id prefixes, `object` tag, `livemode: false` and `null` for what fauxpay does not
//! model, so Stripe's SDKs deserialise them unchanged (`id` first, as Stripe sends it).
//! The structs hold state only, compactly: what is constant or derived (the always-null
//! fields, a card's details, a charge's outcome, `client_secret`) is written at
//! serialisation time instead of being stored with every object, so a million stored
//! payments stay small. The objects themselves live with their resources
//! (`payment_intents/object.rs`, `charges/object.rs`, `refunds/object.rs`).
//!
//! Intents and charges have two serialisers: a `Serialize` impl (lists, search, errors
//! that embed the object) and a byte writer for the hot path ([`write`]), held to the
//! same bytes by a test. The byte writer earns its place: with `serde_json` instead, a
//! new payment costs 69.0k instructions rather than 56.6k (+21.8%, callgrind through
//! `bench/callgrind.sh new`).

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::state::thin::ThinBytes;
use crate::stripe::ids::{CorrelationId, Token};

/// An object's metadata: string keys and values, sorted by key, in one shared
/// allocation behind a one-word pointer (a payment intent and its charge share it).
/// Metadata that is only `order_id` (what most payments carry, and the default
/// correlation key) is stored as its value's text alone, which the payment's correlation
/// id then shares ([`Metadata::share`]); any other is [`ENTRIES`] and then each entry as
/// `key length (u16 LE), value length (u16 LE), key, value`. A text never starts with
/// `ENTRIES` (it is not UTF-8), so the first byte tells the two apart.
#[derive(Clone, Default)]
pub struct Metadata(Option<ThinBytes>);

impl std::fmt::Debug for Metadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The first byte of metadata stored as entries.
const ENTRIES: u8 = 0xFF;

/// The one key whose lone entry is stored as its value's text.
const ORDER_ID: &str = "order_id";

impl Metadata {
    pub fn new() -> Self {
        Self(None)
    }

    /// From entries sorted by key, with unique keys (keys ≤ 40 and values ≤ 500
    /// characters, as validated).
    pub fn from_sorted<K: AsRef<str>, V: AsRef<str>>(entries: &[(K, V)]) -> Self {
        match entries {
            [] => return Self(None),
            [(k, v)] if k.as_ref() == ORDER_ID => return Self(Some(ThinBytes::new(v.as_ref().as_bytes()))),
            _ => {}
        }
        let size: usize = entries
            .iter()
            .map(|(k, v)| 4 + k.as_ref().len() + v.as_ref().len())
            .sum();
        let mut buf = Vec::with_capacity(1 + size);
        buf.push(ENTRIES);
        for (k, v) in entries {
            let (k, v) = (k.as_ref().as_bytes(), v.as_ref().as_bytes());
            buf.extend_from_slice(&(k.len() as u16).to_le_bytes());
            buf.extend_from_slice(&(v.len() as u16).to_le_bytes());
            buf.extend_from_slice(k);
            buf.extend_from_slice(v);
        }
        Self(Some(ThinBytes::new(&buf)))
    }

    /// Metadata that is only `order_id`, equal to `correlation`, keeps the correlation
    /// id's allocation instead of its own copy of the text.
    pub fn share(&mut self, correlation: Option<&CorrelationId>) {
        let Some(c) = correlation else { return };
        if let Some(bytes) = &self.0 {
            if bytes.as_bytes().first() != Some(&ENTRIES) && bytes.as_bytes() == c.thin().as_bytes() {
                self.0 = Some(c.thin().bytes().clone());
            }
        }
    }

    pub fn iter(&self) -> MetadataIter<'_> {
        match self.0.as_ref().map(ThinBytes::as_bytes) {
            None => MetadataIter { lone: None, rest: &[] },
            Some(bytes) => match bytes.split_first() {
                Some((&ENTRIES, rest)) => MetadataIter { lone: None, rest },
                _ => MetadataIter {
                    // It was a `str` when stored.
                    lone: Some((ORDER_ID, std::str::from_utf8(bytes).unwrap_or(""))),
                    rest: &[],
                },
            },
        }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl PartialEq for Metadata {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Metadata {}

/// A metadata's entries, in key order.
pub struct MetadataIter<'a> {
    /// The lone `order_id` entry, stored as its value alone.
    lone: Option<(&'a str, &'a str)>,
    rest: &'a [u8],
}

impl<'a> Iterator for MetadataIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.lone.take() {
            return Some(entry);
        }
        if self.rest.len() < 4 {
            return None;
        }
        let kl = u16::from_le_bytes([self.rest[0], self.rest[1]]) as usize;
        let vl = u16::from_le_bytes([self.rest[2], self.rest[3]]) as usize;
        let (k, rest) = self.rest[4..].split_at(kl);
        let (v, rest) = rest.split_at(vl);
        self.rest = rest;
        // Both were `str`s when stored.
        Some((
            std::str::from_utf8(k).unwrap_or(""),
            std::str::from_utf8(v).unwrap_or(""),
        ))
    }
}

impl Serialize for Metadata {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.iter() {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// `null`, for the many fields Stripe sends that fauxpay does not model.
pub(crate) struct Null;

impl Serialize for Null {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_none()
    }
}

/// `prefix` followed by a token's 24 characters, e.g. `txn_…`.
pub(crate) struct Prefixed<'a>(pub &'static str, pub &'a Token);

impl Serialize for Prefixed<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 40];
        let n = self.0.len();
        buf[..n].copy_from_slice(self.0.as_bytes());
        buf[n..n + 24].copy_from_slice(self.1.text().as_bytes());
        s.serialize_str(std::str::from_utf8(&buf[..n + 24]).unwrap_or(""))
    }
}

/// Salts of the tokens derived from an object's id.
pub(crate) const CLIENT_SECRET: u64 = 0x7365_6372_6574_0001;
pub(crate) const BALANCE_TRANSACTION: u64 = 0x7478_6e00_0000_0002;

/// Writing JSON by hand for the hot path: literals, numbers, and strings that need no
/// escaping (ids, enum names, currency codes) go straight in; client text is escaped.
pub(crate) mod write {
    pub fn raw(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(s.as_bytes());
    }

    /// A string known to need no escaping.
    pub fn plain(out: &mut Vec<u8>, s: &str) {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }

    pub fn opt_plain(out: &mut Vec<u8>, s: Option<&str>) {
        match s {
            Some(s) => plain(out, s),
            None => raw(out, "null"),
        }
    }

    /// Client text, escaped.
    pub fn text(out: &mut Vec<u8>, s: &str) {
        let _ = serde_json::to_writer(&mut *out, s);
    }

    pub fn opt_text(out: &mut Vec<u8>, s: Option<&str>) {
        match s {
            Some(s) => text(out, s),
            None => raw(out, "null"),
        }
    }

    pub fn int(out: &mut Vec<u8>, n: impl itoa::Integer) {
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }

    pub fn opt_int(out: &mut Vec<u8>, n: Option<impl itoa::Integer>) {
        match n {
            Some(n) => int(out, n),
            None => raw(out, "null"),
        }
    }

    pub fn bool(out: &mut Vec<u8>, b: bool) {
        raw(out, if b { "true" } else { "false" });
    }

    pub fn metadata(out: &mut Vec<u8>, m: &super::Metadata) {
        out.push(b'{');
        for (i, (k, v)) in m.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            text(out, k);
            out.push(b':');
            text(out, v);
        }
        out.push(b'}');
    }
}

#[cfg(test)]
mod tests;
