//! JSON pointers (RFC 6901) as a template names them: compiled once when the template
//! is loaded, and followed through an answer's raw bytes when an attempt reads its
//! payment id or a flow step captures a value, without building the document.
//!
//! The walk reads only what leads to the value: at each level it compares keys (or
//! counts array elements) and passes over the values in between by their strings and
//! brackets' depth. It stops at the string the pointer names, so
//! a Stripe object's `id`, its first key, costs a few dozen bytes, and its `status`, some
//! forty keys in, one pass over them. It gives what `serde_json::Value::pointer` gives on
//! the parsed body, except on bodies no API sends:
//! - with duplicate keys the first that leads to a string wins;
//! - what follows the string is not read (reqwest has already refused a body cut short
//!   by the connection);
//! - a value passed over is checked only for its strings and its brackets' depth (not
//!   that they pair, nor its numbers or literals), and a key that is not the token is compared by its bytes, not
//!   checked to be UTF-8.

use std::fmt;

/// A JSON pointer, its tokens unescaped once (`~1` is `/`, `~0` is `~`).
#[derive(Clone, PartialEq, Eq)]
pub struct Pointer {
    text: String,
    tokens: Vec<Token>,
}

#[derive(Clone, PartialEq, Eq)]
struct Token {
    key: Box<str>,
    /// The array index the token names, as `serde_json` reads one (no sign, no leading
    /// zero); `None` when it names no element.
    index: Option<usize>,
}

impl fmt::Debug for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

impl Pointer {
    /// `text` as a pointer: empty (the whole document) or starting with '/'.
    pub fn parse(text: &str) -> Option<Self> {
        let tokens = if text.is_empty() {
            Vec::new()
        } else {
            text.strip_prefix('/')?
                .split('/')
                .map(|t| {
                    let key = t.replace("~1", "/").replace("~0", "~");
                    let index = if key.starts_with('+') || (key.starts_with('0') && key.len() != 1) {
                        None
                    } else {
                        key.parse().ok()
                    };
                    Token { key: key.into(), index }
                })
                .collect()
        };
        Some(Self {
            text: text.to_string(),
            tokens,
        })
    }

    /// A pointer as a template writes one: starting with '/' (a template never names the
    /// whole answer).
    pub fn rooted(text: &str) -> Option<Self> {
        Self::parse(text).filter(|_| text.starts_with('/'))
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// What the pointer names in a parsed document.
    pub fn lookup<'a>(&self, doc: &'a serde_json::Value) -> Option<&'a serde_json::Value> {
        doc.pointer(&self.text)
    }

    /// The string the pointer names in `json`, read until that string (see the module's
    /// doc); `None` when no key path leads to a string in a body that is JSON up to it.
    pub fn find_str(&self, json: &[u8]) -> Option<String> {
        let mut walk = Walk { b: json, i: 0 };
        walk.follow(&self.tokens).ok().flatten()
    }
}

/// Where the walk is in the body. A method's `Err` is a body that is not JSON at `i`:
/// the walk ends with nothing found, as a parse would.
struct Walk<'a> {
    b: &'a [u8],
    i: usize,
}

struct NotJson;

/// The high bit of each byte of `word` (little-endian) that may equal `byte`: the lowest
/// one set marks the first that does (a borrow can set a bit only above a true match).
fn bytes_equal(word: u64, byte: u8) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let x = word ^ (ONES * u64::from(byte));
    x.wrapping_sub(ONES) & !x & (ONES << 7)
}

type Step<T> = Result<T, NotJson>;

impl Walk<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    /// The next byte after white space, not consumed.
    fn peek(&mut self) -> Step<u8> {
        self.ws();
        self.b.get(self.i).copied().ok_or(NotJson)
    }

    fn expect(&mut self, byte: u8) -> Step<()> {
        if self.peek()? != byte {
            return Err(NotJson);
        }
        self.i += 1;
        Ok(())
    }

    /// Passes over a string whose opening quote is at `i`; its contents' range, and
    /// whether it holds an escape. Eight bytes at a time while they hold neither a quote
    /// nor a backslash (an answer's strings are mostly keys of a dozen bytes, shorter
    /// than what `memchr`'s set-up costs).
    fn string(&mut self) -> Step<(usize, usize, bool)> {
        let start = self.i + 1;
        let mut k = start;
        let mut escaped = false;
        loop {
            while let Some(chunk) = self.b.get(k..).and_then(<[u8]>::first_chunk::<8>) {
                let word = u64::from_le_bytes(*chunk);
                let found = bytes_equal(word, b'"') | bytes_equal(word, b'\\');
                if found != 0 {
                    k += (found.trailing_zeros() / 8) as usize;
                    break;
                }
                k += 8;
            }
            match self.b.get(k) {
                Some(b'"') => {
                    self.i = k + 1;
                    return Ok((start, k, escaped));
                }
                Some(b'\\') => {
                    escaped = true;
                    k += 2;
                }
                Some(_) => k += 1,
                None => return Err(NotJson),
            }
        }
    }

    /// A string's decoded value, as `serde_json` reads it (escapes, UTF-8, no control
    /// characters); the string is the quoted bytes just passed over.
    fn decoded(&self, start: usize, end: usize, escaped: bool) -> Step<String> {
        let raw = &self.b[start..end];
        if escaped {
            return serde_json::from_slice(&self.b[start - 1..=end]).map_err(|_| NotJson);
        }
        if raw.iter().any(|&c| c < 0x20) {
            return Err(NotJson);
        }
        std::str::from_utf8(raw).map(str::to_string).map_err(|_| NotJson)
    }

    /// Passes over one value: a string, an object or array (by its brackets, strings
    /// passed over whole), or a number or literal (up to the next delimiter).
    fn skip(&mut self) -> Step<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' | b'[' => {
                let mut depth = 0usize;
                while let Some(&c) = self.b.get(self.i) {
                    match c {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                return Ok(());
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
                Err(NotJson)
            }
            b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                while let Some(c) = self.b.get(self.i) {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.i += 1;
                }
                Ok(())
            }
            _ => Err(NotJson),
        }
    }

    /// Consumes a container's opening bracket; whether `close` follows at once (then
    /// consumed too: the container is empty).
    fn opens_empty(&mut self, close: u8) -> Step<bool> {
        self.i += 1;
        if self.peek()? == close {
            self.i += 1;
            return Ok(true);
        }
        Ok(false)
    }

    /// One member's value (an object's, after its key) or an array's element: followed
    /// into when `wanted`, else passed over; then the `,` or the container's `close`.
    /// `Some(Some)` the string found, `Some(None)` the container ended without it, `None`
    /// another member follows.
    fn member(&mut self, wanted: bool, rest: &[Token], close: u8) -> Step<Option<Option<String>>> {
        if wanted {
            if let Some(found) = self.follow(rest)? {
                return Ok(Some(Some(found)));
            }
        } else {
            self.skip()?;
        }
        match self.peek()? {
            b',' => {
                self.i += 1;
                Ok(None)
            }
            c if c == close => {
                self.i += 1;
                Ok(Some(None))
            }
            _ => Err(NotJson),
        }
    }

    /// Follows `tokens` into the value at `i`, passing over it whole when it does not
    /// lead to a string: `Ok(Some)` the string found, `Ok(None)` the value passed.
    fn follow(&mut self, tokens: &[Token]) -> Step<Option<String>> {
        let Some((first, rest)) = tokens.split_first() else {
            if self.peek()? == b'"' {
                let (start, end, escaped) = self.string()?;
                return self.decoded(start, end, escaped).map(Some);
            }
            return self.skip().map(|()| None);
        };
        match self.peek()? {
            b'{' => {
                if self.opens_empty(b'}')? {
                    return Ok(None);
                }
                loop {
                    if self.peek()? != b'"' {
                        return Err(NotJson);
                    }
                    let (start, end, escaped) = self.string()?;
                    let is_it = if escaped {
                        *self.decoded(start, end, true)? == *first.key
                    } else {
                        self.b[start..end] == *first.key.as_bytes()
                    };
                    self.expect(b':')?;
                    if let Some(found) = self.member(is_it, rest, b'}')? {
                        return Ok(found);
                    }
                }
            }
            b'[' => {
                let Some(target) = first.index else {
                    return self.skip().map(|()| None);
                };
                if self.opens_empty(b']')? {
                    return Ok(None);
                }
                for n in 0.. {
                    if let Some(found) = self.member(n == target, rest, b']')? {
                        return Ok(found);
                    }
                }
                Ok(None)
            }
            _ => self.skip().map(|()| None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// A payment intent as the provider answers one, with the shapes a walk passes over:
    /// nested objects and arrays, empty ones, escapes, numbers, literals.
    const INTENT: &str = r#"{
  "id": "pi_3Q",
  "object": "payment_intent",
  "amount": 2500, "amount_capturable": 0, "amount_details": {"tip": {}},
  "amount_received": 2500, "application_fee_amount": null, "automatic_payment_methods": null,
  "canceled_at": null, "capture_method": "automatic", "client_secret": "pi_3Q_secret_x",
  "confirmation_method": "automatic", "created": 1733500000, "currency": "usd",
  "description": "a \"quoted\" \\ back\/slash \u00e9 caf\u00e9 \ud83d\ude00",
  "last_payment_error": null, "latest_charge": "ch_3Q", "livemode": false,
  "metadata": {"order_id": "r1-000001", "note": "a } and ] and \" in a string", "status": "not this one", "nested": {"status": [1, {"status": "no"}]}},
  "next_action": null,
  "payment_method_options": {"card": {"installments": null, "mandate_options": null, "network": null, "request_three_d_secure": "automatic"}},
  "payment_method_types": ["card", "link"],
  "processing": null, "amount_list": [-1.5e3, 0, 2E-2, true, false, null, [], [[]], {}],
  "st\u0061ge": "escaped key",
  "status": "succeeded",
  "transfer_group": null
}"#;

    /// The pointer to each value of `v`, with the value: every path a template may name.
    fn paths(v: &Value, at: String, out: &mut Vec<(String, Value)>) {
        out.push((at.clone(), v.clone()));
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    paths(v, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
                }
            }
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    paths(v, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    fn parsed(body: &[u8], p: &str) -> Option<String> {
        let v: Value = serde_json::from_slice(body).ok()?;
        Pointer::parse(p)?.lookup(&v)?.as_str().map(str::to_string)
    }

    fn found(body: &[u8], p: &str) -> Option<String> {
        Pointer::parse(p).unwrap().find_str(body)
    }

    #[test]
    fn every_path_of_well_formed_bodies_finds_what_the_parsed_document_holds() {
        let bodies = [
            INTENT,
            r#"{"data":[{"id":"x"},{"id":"y"}],"a/b":{"m~n":"z","":"empty key"},"0":["zero"]}"#,
            // An escaped backslash just before the closing quote, passed over and found.
            r#"{"skipped":"ends in \\","k\\":["\\"],"found":"\\"}"#,
            r#"{"error":{"type":"card_error","payment_intent":{"id":"pi_2","x":[1,{"id":3}]}}}"#,
            r#"[ "a" , [ "b" , { "c" : "d" } ] ]"#,
            r#""whole""#,
            "\t{\"k\" :\r\n \"v\" }\n",
        ];
        let mut checked = 0;
        for body in bodies {
            let mut all = Vec::new();
            paths(&serde_json::from_str(body).unwrap(), String::new(), &mut all);
            for (p, v) in &all {
                assert_eq!(
                    found(body.as_bytes(), p),
                    v.as_str().map(str::to_string),
                    "{p} in {body}"
                );
                checked += usize::from(v.is_string());
                // Paths that lead nowhere: a key or index too far.
                for missing in [format!("{p}/nope"), format!("{p}/9"), format!("{p}/")] {
                    assert_eq!(
                        found(body.as_bytes(), &missing),
                        parsed(body.as_bytes(), &missing),
                        "{missing}"
                    );
                }
            }
        }
        assert!(checked >= 28, "only {checked} strings checked");
        assert_eq!(found(INTENT.as_bytes(), "/status").as_deref(), Some("succeeded"));
        assert_eq!(found(INTENT.as_bytes(), "/stage").as_deref(), Some("escaped key"));
        let backslashes = br#"{"skipped":"ends in \\","found":"\\"}"#;
        assert_eq!(found(backslashes, "/found").as_deref(), Some("\\"));
        assert_eq!(
            found(INTENT.as_bytes(), "/description").as_deref(),
            Some("a \"quoted\" \\ back/slash é café 😀")
        );
        // serde_json's array indices: no sign, no leading zero.
        for p in ["/data/01/id", "/data/+1/id", "/data/-1/id", "/0/0"] {
            let body = br#"{"data":[{"id":"x"},{"id":"y"}],"0":["zero"]}"#;
            assert_eq!(found(body, p), parsed(body, p), "{p}");
        }
    }

    #[test]
    fn the_walk_stops_at_the_string_and_refuses_what_it_reads_that_is_not_json() {
        for (body, p, want) in [
            // The first of duplicate keys that leads to a string wins.
            (&br#"{"id":"first","id":"second"}"#[..], "/id", Some("first")),
            (br#"{"id":5,"object":{"id":"no"},"id":"pi_3"}"#, "/id", Some("pi_3")),
            (br#"{"a":{"b":1},"a":{"b":"two"}}"#, "/a/b", Some("two")),
            // What follows the string is not read.
            (br#"{"id":"pi_1"} trailing"#, "/id", Some("pi_1")),
            (
                br#"{"id":"pi_1","object":"payment_intent","amount":"#,
                "/id",
                Some("pi_1"),
            ),
            // Values passed over are checked by their brackets and strings only.
            (br#"{"n":01,"id":"x"}"#, "/id", Some("x")),
            // Broken before the string: nothing.
            (br#"{"id" "pi_1"}"#, "/id", None),
            (br#"{"x":"unterminated}"#, "/id", None),
            (br#"{"x":[1,2}"#, "/id", None),
            (br#"{"x":{"y":"z"}"#, "/id", None),
            (br#"{"x":1 "id":"y"}"#, "/id", None),
            (br#"{"id":"bad \q escape"}"#, "/id", None),
            (b"{\"id\":\"control \x01 char\"}", "/id", None),
            (b"{\"id\":\"\xff\"}", "/id", None),
            (br#"{"x":"ends in a backslash\"#, "/id", None),
            (br#"{x:"y"}"#, "/x", None),
            (b"", "/id", None),
            (b"   ", "", None),
            (br#"{"id":5}"#, "/id", None),
            (br#"[1,2]"#, "/id", None),
        ] {
            assert_eq!(
                found(body, p).as_deref(),
                want,
                "{p} in {}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn eight_bytes_at_a_time_find_the_first_quote_or_backslash() {
        // Every byte value at every place, over fillers next to the two searched for.
        for filler in [0u8, b'!', b'#', b'[', b']', b'\\', 0x7f, 0xa2, 0xdc, 0xff] {
            for place in 0..8 {
                for byte in 0..=255u8 {
                    let mut word = [filler; 8];
                    word[place] = byte;
                    if place < 7 {
                        word[7] = b'"';
                    }
                    let first = word.iter().position(|&c| c == b'"' || c == b'\\');
                    let found =
                        bytes_equal(u64::from_le_bytes(word), b'"') | bytes_equal(u64::from_le_bytes(word), b'\\');
                    let at = (found != 0).then(|| (found.trailing_zeros() / 8) as usize);
                    assert_eq!(at, first, "{word:?}");
                }
            }
        }
    }

    #[test]
    fn pointers_are_parsed_as_rfc_6901_writes_them() {
        assert_eq!(Pointer::parse("status"), None);
        assert_eq!(Pointer::rooted(""), None);
        assert!(Pointer::rooted("/").is_some());
        let p = Pointer::parse("/a~1b/m~0n/~01").unwrap();
        assert_eq!(p.as_str(), "/a~1b/m~0n/~01");
        assert_eq!(
            found(br#"{"a/b":{"m~n":{"~1":"z"}}}"#, p.as_str()).as_deref(),
            Some("z")
        );
        assert_eq!(
            Pointer::parse("").unwrap().find_str(br#""whole""#).as_deref(),
            Some("whole")
        );
    }
}
