//! Identifiers: Stripe-style object ids, request ids, idempotency keys, correlation ids.
//!
//! Each kind of id is its own newtype so a charge id can never be passed where a
//! payment intent id or an idempotency key is expected. Object ids carry Stripe's
//! prefixes (`pi_`, `ch_`, `re_`, `pm_`, `cus_`, `seti_`, `evt_`, `we_`, `price_`, `cs_test_`, `li_`, `req_`) followed by
//! 24 random alphanumerics; a product's id (`prod_…`) may also be one its creator chose.

use std::fmt;
use std::num::NonZeroU64;
use std::ops::Deref;
use std::sync::Arc;

use rand::Rng;
use serde::{Serialize, Serializer};

use crate::state::thin::ThinStr;

/// Where the tokens of this thread come from (see [`scripted`]).
enum Script {
    Off,
    Record(Vec<[u64; 2]>),
    Replay(std::vec::IntoIter<[u64; 2]>),
}

thread_local! {
    static SCRIPT: std::cell::RefCell<Script> = const { std::cell::RefCell::new(Script::Off) };
    /// Whether every event id is drawn (see [`with_event_ids`]).
    static DRAWN_EVENT_IDS: std::cell::RefCell<bool> = const { std::cell::RefCell::new(false) };
}

/// Runs `f` with a scope's event ids after the first `derived` from it ([`EventId::nth`],
/// no draw: what a live request does), or else each drawn, one draw each, as a fauxpay
/// before data dir schema 5 made them: recovery replays a write of such a log so, for
/// the tokens its record lists to be drawn where they were.
pub fn with_event_ids<R>(derived: bool, f: impl FnOnce() -> R) -> R {
    crate::state::scoped::scoped(&DRAWN_EVENT_IDS, !derived, f).0
}

/// Whether this thread draws every event id ([`with_event_ids`]).
pub fn event_ids_drawn() -> bool {
    DRAWN_EVENT_IDS.with_borrow(|drawn| *drawn)
}

/// Runs `f` (a synchronous operation) with its tokens scripted: with `replay = None`
/// every token it draws is random and returned, in order, beside its result; with
/// `Some(tokens)` it draws those tokens instead, so running the same operation on the
/// same state again (recovery from the data dir) makes the same ids.
pub fn scripted<R>(replay: Option<Vec<[u64; 2]>>, f: impl FnOnce() -> R) -> (R, Vec<[u64; 2]>) {
    let next = match replay {
        Some(tokens) => Script::Replay(tokens.into_iter()),
        None => Script::Record(Vec::new()),
    };
    let before = SCRIPT.replace(next);
    let result = f();
    let drawn = match SCRIPT.replace(before) {
        Script::Record(drawn) => drawn,
        _ => Vec::new(),
    };
    (result, drawn)
}

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The 24 random alphanumerics of a generated id, kept as the two 64-bit numbers their
/// halves spell in base 62: 16 bytes inline, no allocation, cheap to hash and compare
/// (the first is never zero, so an `Option` of an id is 16 bytes too).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token(NonZeroU64, u64);

/// The bits of a token that name its group ([`Token::group`]): 64 groups.
pub const GROUP_BITS: u32 = 6;
const GROUP_MASK: u64 = (1 << GROUP_BITS) - 1;

/// The offset of a half's leading character: a weighted sum of its other eleven digits.
fn lead_offset(rest: &[u8]) -> u8 {
    (rest
        .iter()
        .enumerate()
        .map(|(i, &d)| u32::from(d) * (i as u32 + 1))
        .sum::<u32>()
        % 62) as u8
}

impl Token {
    /// A fresh random token; while an operation is [`scripted`], the tokens it draws
    /// are written down, or read back from an earlier run's script.
    pub fn random() -> Self {
        Self::draw(|t| t)
    }

    /// A fresh random token in the group `group` gives (its low [`GROUP_BITS`] bits, see
    /// [`Token::group`]), drawn as [`Token::random`] draws: one draw, written down or read
    /// back. `group` is asked only for a fresh token: a token read back keeps its own.
    pub fn random_in(group: impl FnOnce() -> usize) -> Self {
        Self::draw(|Token(first, second)| Token(first, (second & !GROUP_MASK) | (group() as u64 & GROUP_MASK)))
    }

    /// The token's group: the low [`GROUP_BITS`] bits of its second number (random, unless
    /// it was drawn or derived in a group; a request's events are, so that they can share
    /// a shard).
    pub fn group(&self) -> usize {
        (self.1 & GROUP_MASK) as usize
    }

    fn draw(shape: impl FnOnce(Token) -> Token) -> Self {
        SCRIPT.with_borrow_mut(|script| match script {
            Script::Off => shape(Self::fresh()),
            Script::Record(drawn) => {
                let t = shape(Self::fresh());
                drawn.push(t.to_pair());
                t
            }
            Script::Replay(drawn) => drawn
                .next()
                .and_then(Self::from_pair)
                .unwrap_or_else(|| shape(Self::fresh())),
        })
    }

    fn fresh() -> Self {
        let mut rng = rand::rng();
        loop {
            if let Some(first) = NonZeroU64::new(rng.random()) {
                return Self(first, rng.random());
            }
        }
    }

    /// The token as two numbers (for the data dir's records).
    pub fn to_pair(self) -> [u64; 2] {
        [self.0.get(), self.1]
    }

    /// The token of [`Token::to_pair`] (`None` for a first number of zero).
    pub fn from_pair([a, b]: [u64; 2]) -> Option<Self> {
        NonZeroU64::new(a).map(|a| Self(a, b))
    }

    /// Writes the 24 characters into `out`. Each half is its number's 12 base-62
    /// digits; the leading digit of a 64-bit number is always 0, so it is written offset
    /// by a weighted sum of the other eleven (every character then varies, and a parse
    /// can undo it).
    pub fn write(&self, out: &mut [u8; 24]) {
        for (half, mut x) in [self.0.get(), self.1].into_iter().enumerate() {
            let digits = &mut out[half * 12..half * 12 + 12];
            for d in digits.iter_mut().rev() {
                *d = (x % 62) as u8;
                x /= 62;
            }
            digits[0] = (digits[0] + lead_offset(&digits[1..])) % 62;
            for d in digits.iter_mut() {
                *d = ALPHABET[*d as usize];
            }
        }
    }

    /// The token spelled by exactly 24 alphanumerics, if a token can spell them.
    pub fn parse(s: &[u8]) -> Option<Self> {
        if s.len() != 24 {
            return None;
        }
        let mut halves = [0u64; 2];
        for (half, chunk) in s.chunks(12).enumerate() {
            let mut digits = [0u8; 12];
            for (d, &c) in digits.iter_mut().zip(chunk) {
                *d = match c {
                    b'0'..=b'9' => c - b'0',
                    b'A'..=b'Z' => c - b'A' + 10,
                    b'a'..=b'z' => c - b'a' + 36,
                    _ => return None,
                };
            }
            digits[0] = (digits[0] + 62 - lead_offset(&digits[1..])) % 62;
            let mut x = 0u64;
            for d in digits {
                x = x.checked_mul(62)?.checked_add(u64::from(d))?;
            }
            halves[half] = x;
        }
        Some(Self(NonZeroU64::new(halves[0])?, halves[1]))
    }

    /// Another token derived from this one (for `salt`), as random-looking and as
    /// unique: a charge's balance transaction, an intent's client secret, computed when
    /// written rather than stored with every object.
    pub fn derived(&self, salt: u64) -> Token {
        fn mix(mut z: u64) -> u64 {
            // splitmix64's finaliser: a bijection on u64.
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        let first = mix(self.0.get() ^ salt);
        let second = mix(self.1 ^ salt.rotate_left(32) ^ first);
        Token(NonZeroU64::new(first).unwrap_or(NonZeroU64::MIN), second)
    }

    /// The `n`th token of a run that starts at this one (the 0th is itself): derived
    /// ([`Token::derived`]), in this token's group.
    pub fn nth_in_group(&self, n: u32) -> Token {
        if n == 0 {
            return *self;
        }
        /// Salts the places of a run apart from every other derived token's (its low 32
        /// bits clear: each place its own salt).
        const RUN: u64 = 0x6576_656e_0000_0000;
        let Token(first, second) = self.derived(RUN | u64::from(n));
        Token(first, (second & !GROUP_MASK) | (self.1 & GROUP_MASK))
    }

    /// The 24 characters, on the stack.
    pub fn text(&self) -> IdStr {
        let mut s = IdStr { buf: [0; 32], len: 24 };
        let mut chars = [0u8; 24];
        self.write(&mut chars);
        s.buf[..24].copy_from_slice(&chars);
        s
    }
}

/// An id spelled out on the stack (a prefix and 24 alphanumerics); derefs to `str`.
#[derive(Clone, Copy)]
pub struct IdStr {
    buf: [u8; 32],
    len: u8,
}

impl IdStr {
    fn new(prefix: &str, token: &Token) -> Self {
        let mut s = Self {
            buf: [0; 32],
            len: (prefix.len() + 24) as u8,
        };
        s.buf[..prefix.len()].copy_from_slice(prefix.as_bytes());
        let mut chars = [0u8; 24];
        token.write(&mut chars);
        s.buf[prefix.len()..prefix.len() + 24].copy_from_slice(&chars);
        s
    }
}

impl Deref for IdStr {
    type Target = str;
    fn deref(&self) -> &str {
        // The buffer holds an ASCII prefix and base-62 ASCII characters: always valid.
        std::str::from_utf8(&self.buf[..self.len as usize]).unwrap_or_default()
    }
}

impl fmt::Display for IdStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl fmt::Debug for IdStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl Serialize for Token {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text(), f)
    }
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Token);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A fresh random id with this kind's prefix.
            pub fn generate() -> Self {
                Self(Token::random())
            }

            /// A fresh random id in the group `group` gives ([`Token::random_in`]).
            pub fn generate_in(group: impl FnOnce() -> usize) -> Self {
                Self(Token::random_in(group))
            }

            /// The id a client sent, if it is one fauxpay could have generated (any other
            /// string names no object).
            pub fn parse(s: &str) -> Option<Self> {
                Token::parse(s.strip_prefix($prefix)?.as_bytes()).map(Self)
            }

            /// The id as text, on the stack.
            pub fn as_str(&self) -> IdStr {
                IdStr::new($prefix, &self.0)
            }

            /// The id's random part.
            pub fn token(&self) -> Token {
                self.0
            }

            /// The id with this random part.
            pub fn from_token(token: Token) -> Self {
                Self(token)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.as_str())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.as_str(), f)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.as_str())
            }
        }
    };
}

id_type!(
    /// A payment intent's id (`pi_…`).
    PaymentIntentId, "pi_"
);
id_type!(
    /// A charge's id (`ch_…`).
    ChargeId, "ch_"
);
id_type!(
    /// A refund's id (`re_…`).
    RefundId, "re_"
);
id_type!(
    /// A payment method's id (`pm_…`), minted when a test payment method is used.
    PaymentMethodId, "pm_"
);
id_type!(
    /// A customer's id (`cus_…`).
    CustomerId, "cus_"
);
id_type!(
    /// A setup intent's id (`seti_…`).
    SetupIntentId, "seti_"
);
id_type!(
    /// The id of one HTTP request (`req_…`), sent back in the `Request-Id` header.
    RequestId, "req_"
);
id_type!(
    /// An event's id (`evt_…`).
    EventId, "evt_"
);

impl EventId {
    /// The id of the `n`th event of a scope whose first event is `self` (the 0th is
    /// `self`): derived, in the same group, so that a request's events store their first
    /// id alone and draw it alone.
    pub fn nth(&self, n: u32) -> Self {
        Self(self.0.nth_in_group(n))
    }
}
id_type!(
    /// A webhook endpoint's id (`we_…`).
    WebhookEndpointId, "we_"
);
id_type!(
    /// A price's id (`price_…`).
    PriceId, "price_"
);
id_type!(
    /// A Checkout Session's id (`cs_test_…`).
    CheckoutSessionId, "cs_test_"
);
id_type!(
    /// A Checkout Session line item's id (`li_…`).
    LineItemId, "li_"
);

/// The longest id a client may choose for a product (`POST /v1/products` with `id`).
pub const MAX_PRODUCT_ID: usize = 255;

/// A product's id: `prod_…` when fauxpay makes it, or the one the client chose at
/// creation (Stripe lets `POST /v1/products` name it).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProductId(Arc<str>);

impl ProductId {
    pub const PREFIX: &'static str = "prod_";

    /// A fresh random `prod_…` id.
    pub fn generate() -> Self {
        Self(IdStr::new(Self::PREFIX, &Token::random()).to_string().into())
    }

    /// The id a client names (any non-empty text of at most [`MAX_PRODUCT_ID`] bytes).
    pub fn parse(s: &str) -> Option<Self> {
        (!s.is_empty() && s.len() <= MAX_PRODUCT_ID).then(|| Self(s.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProductId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ProductId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Serialize for ProductId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// The object a request created or touched, for the request log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectId {
    Intent(PaymentIntentId),
    Charge(ChargeId),
    Refund(RefundId),
    Customer(CustomerId),
    PaymentMethod(PaymentMethodId),
    SetupIntent(SetupIntentId),
    Price(PriceId),
    CheckoutSession(CheckoutSessionId),
}

impl ObjectId {
    /// Any id fauxpay generates for an object (`pi_…`, `ch_…`, `re_…`, `cus_…`, `pm_…`,
    /// `seti_…`).
    pub fn parse(s: &str) -> Option<Self> {
        PaymentIntentId::parse(s)
            .map(Self::Intent)
            .or_else(|| ChargeId::parse(s).map(Self::Charge))
            .or_else(|| RefundId::parse(s).map(Self::Refund))
            .or_else(|| CustomerId::parse(s).map(Self::Customer))
            .or_else(|| PaymentMethodId::parse(s).map(Self::PaymentMethod))
            .or_else(|| SetupIntentId::parse(s).map(Self::SetupIntent))
            .or_else(|| PriceId::parse(s).map(Self::Price))
            .or_else(|| CheckoutSessionId::parse(s).map(Self::CheckoutSession))
    }

    pub fn as_str(&self) -> IdStr {
        match self {
            Self::Intent(id) => id.as_str(),
            Self::Charge(id) => id.as_str(),
            Self::Refund(id) => id.as_str(),
            Self::Customer(id) => id.as_str(),
            Self::PaymentMethod(id) => id.as_str(),
            Self::SetupIntent(id) => id.as_str(),
            Self::Price(id) => id.as_str(),
            Self::CheckoutSession(id) => id.as_str(),
        }
    }
}

impl Serialize for ObjectId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_str())
    }
}

/// Which logical payment a money movement belongs to (by default `metadata[order_id]`):
/// one allocation its intent, charge and ledger record share, one word wide.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CorrelationId(ThinStr);

impl CorrelationId {
    pub fn new(s: &str) -> Self {
        Self(s.into())
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Its text's allocation, which a payment's `metadata[order_id]` shares.
    pub fn thin(&self) -> &ThinStr {
        &self.0
    }
}

impl Serialize for CorrelationId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// The API key a request authenticated with: idempotency keys are scoped to it (each
/// holds it, one word wide).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApiKey(ThinStr);

impl ApiKey {
    pub fn new(s: &str) -> Self {
        Self(s.into())
    }

    /// No key (one shared empty key; nothing allocated).
    pub fn none() -> Self {
        static NONE: std::sync::OnceLock<ApiKey> = std::sync::OnceLock::new();
        NONE.get_or_init(|| Self::new("")).clone()
    }

    /// The key for `s`, sharing one allocation with the last key this thread saw (a
    /// client sends the same key with every request).
    pub fn interned(s: &str) -> Self {
        thread_local! {
            static LAST: std::cell::RefCell<Option<ApiKey>> = const { std::cell::RefCell::new(None) };
        }
        LAST.with(|last| {
            let mut last = last.borrow_mut();
            match &*last {
                Some(k) if k.as_bytes() == s.as_bytes() => k.clone(),
                _ => {
                    let k = Self::new(s);
                    *last = Some(k.clone());
                    k
                }
            }
        })
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scripted_operation_draws_the_same_tokens_again() {
        let (first, drawn) = scripted(None, || (PaymentIntentId::generate(), EventId::generate()));
        assert_eq!(drawn.len(), 2);
        let (again, _) = scripted(Some(drawn), || (PaymentIntentId::generate(), EventId::generate()));
        assert_eq!(first, again);
        // Outside a script, tokens are random again.
        assert_ne!(PaymentIntentId::generate(), first.0);
    }

    #[test]
    fn a_token_drawn_in_a_group_is_random_elsewhere_and_replays_as_drawn() {
        let (ids, drawn) = scripted(None, || {
            (0..200).map(|i| EventId::generate_in(|| i % 64)).collect::<Vec<_>>()
        });
        assert!(ids.iter().enumerate().all(|(i, id)| id.token().group() == i % 64));
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), 200);
        assert!(
            ids.iter().all(|id| EventId::parse(&id.to_string()) == Some(*id)),
            "spelled and read back"
        );
        let (again, _) = scripted(Some(drawn), || {
            (0..200)
                .map(|_| EventId::generate_in(|| panic!("a token read back draws no group")))
                .collect::<Vec<_>>()
        });
        assert_eq!(again, ids, "a replay reads back what was drawn");
    }

    #[test]
    fn generated_ids_carry_prefix_and_differ() {
        let a = PaymentIntentId::generate();
        let b = PaymentIntentId::generate();
        assert!(a.as_str().starts_with("pi_"));
        assert_eq!(a.as_str().len(), 27);
        assert_ne!(a, b);
        assert!(ChargeId::generate().as_str().starts_with("ch_"));
        let cus = CustomerId::generate();
        assert_eq!(cus.as_str().len(), 28);
        assert_eq!(ObjectId::parse(&cus.as_str()), Some(ObjectId::Customer(cus)));
        let pm = PaymentMethodId::generate();
        assert_eq!(ObjectId::parse(&pm.as_str()), Some(ObjectId::PaymentMethod(pm)));
        assert_eq!(ObjectId::parse("pm_card_visa"), None);
        let seti = SetupIntentId::generate();
        assert_eq!(seti.as_str().len(), 29);
        assert_eq!(ObjectId::parse(&seti.as_str()), Some(ObjectId::SetupIntent(seti)));
        assert!(a.as_str()[3..].bytes().all(|b| b.is_ascii_alphanumeric()));
    }

    #[test]
    fn ids_parse_back_and_strangers_are_none() {
        for _ in 0..100 {
            let id = ChargeId::generate();
            assert_eq!(ChargeId::parse(&id.as_str()), Some(id));
            assert_eq!(id.to_string(), &*id.as_str());
        }
        assert_eq!(ChargeId::parse("ch_123"), None);
        assert_eq!(ChargeId::parse("pi_000000000000000000000000"), None);
        assert_eq!(
            ChargeId::parse("ch_zzzzzzzzzzzzzzzzzzzzzzzz"),
            None,
            "beyond 64 bits a half"
        );
        assert_eq!(ChargeId::parse("ch_00000000000000000000000-"), None);
        // A half's leading character is offset by its other digits ('B' = 11 × 1 here);
        // one that does not match them spells more than 64 bits.
        assert!(ChargeId::parse("ch_B00000000001000000000000").is_some());
        assert_eq!(ChargeId::parse("ch_000000000001000000000000"), None);
        assert_eq!(ChargeId::parse("ch_000000000000B00000000001"), None, "never generated");
        let leads: std::collections::HashSet<u8> = (0..200)
            .flat_map(|_| {
                let s = ChargeId::generate().as_str();
                [s.as_bytes()[3], s.as_bytes()[15]]
            })
            .collect();
        assert!(leads.len() > 20, "every character of an id varies");
        assert_eq!(std::mem::size_of::<Option<ChargeId>>(), 16);
        let id = RequestId::generate();
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{}\"", id.as_str()));
    }
}
