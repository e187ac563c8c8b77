//! [`Params`] as a JSON object, written and read without a `serde_json::Value` between:
//! how a data-dir record keeps a request's parameters (and what [`Params::to_json`]
//! gives as a `Value`): keys sorted, form values as strings, JSON numbers as numbers.
//! Reading gives what [`Params::from_value`] makes of its parse, the tree built
//! straight from the parser (recovery reads a million of them).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::Serialize;

use super::{push_text, sort_entries, span_str, Node, Params, Span, MAX_PARAMS};

/// Writes `params` as a JSON object (`serialize_with`).
pub fn serialize<S: Serializer>(params: &Params, s: S) -> Result<S::Ok, S::Error> {
    Json(params).serialize(s)
}

/// `Params` as a serializable JSON object.
pub(super) struct Json<'a>(pub(super) &'a Params);

impl Serialize for Json<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Entries(&self.0.text, &self.0.root).serialize(s)
    }
}

/// Reads a JSON object into parameters, as [`Params::from_value`] reads its parse
/// (`deserialize_with`).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Params, D::Error> {
    let mut text = String::new();
    let mut budget = MAX_PARAMS;
    let node = Build {
        text: &mut text,
        budget: &mut budget,
    }
    .deserialize(d)?;
    match node {
        Node::Object(root) => Ok(Params { text, root }),
        _ => Err(de::Error::custom("parameters: expected a JSON object")),
    }
}

/// An object's entries, as JSON.
struct Entries<'a>(&'a str, &'a [(Span, Node)]);

/// One node, as JSON.
struct One<'a>(&'a str, &'a Node);

impl Serialize for Entries<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.1.len()))?;
        for (k, v) in self.1 {
            map.serialize_entry(span_str(self.0, *k), &One(self.0, v))?;
        }
        map.end()
    }
}

impl Serialize for One<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.0;
        match self.1 {
            Node::Null => s.serialize_unit(),
            Node::Bool(b) => s.serialize_bool(*b),
            // As `to_json`: a number that does not read back as one stays its text.
            Node::Number(n) => match span_str(text, *n).parse::<serde_json::Number>() {
                Ok(number) => number.serialize(s),
                Err(_) => s.serialize_str(span_str(text, *n)),
            },
            Node::String(v) => s.serialize_str(span_str(text, *v)),
            Node::Object(entries) => Entries(text, entries).serialize(s),
            Node::List(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&One(text, item))?;
                }
                seq.end()
            }
        }
    }
}

/// Builds one node into the text buffer, counting leaves as [`Params::from_value`] does
/// (scalars, empty objects and empty lists) and refusing NUL characters.
struct Build<'a> {
    text: &'a mut String,
    budget: &'a mut usize,
}

impl Build<'_> {
    fn count<E: de::Error>(&mut self) -> Result<(), E> {
        *self.budget = self
            .budget
            .checked_sub(1)
            .ok_or_else(|| E::custom(format!("parameters: more than {MAX_PARAMS}")))?;
        Ok(())
    }

    fn number<E: de::Error>(mut self, n: serde_json::Number) -> Result<Node, E> {
        self.count()?;
        Ok(Node::Number(push_text(self.text, &n.to_string())))
    }
}

impl<'de> DeserializeSeed<'de> for Build<'_> {
    type Value = Node;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_> {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<Node, E> {
        self.count()?;
        Ok(Node::Null)
    }

    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<Node, E> {
        self.count()?;
        Ok(Node::Bool(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        self.number(v.into())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        self.number(v.into())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        let n = serde_json::Number::from_f64(v).ok_or_else(|| E::custom("parameters: a number JSON cannot hold"))?;
        self.number(n)
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<Node, E> {
        self.count()?;
        Ok(Node::String(push_checked(self.text, v)?))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Build {
            text: &mut *self.text,
            budget: &mut *self.budget,
        })? {
            items.push(item);
        }
        if items.is_empty() {
            self.count()?;
        }
        Ok(Node::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Node, A::Error> {
        let mut entries: Vec<(Span, Node)> = Vec::new();
        while let Some(key) = map.next_key_seed(Key(&mut *self.text))? {
            let value = map.next_value_seed(Build {
                text: &mut *self.text,
                budget: &mut *self.budget,
            })?;
            entries.push((key, value));
        }
        if entries.is_empty() {
            self.count()?;
        }
        // As a parsed object: a key given twice keeps its last value (the sort is stable).
        sort_entries(self.text, &mut entries);
        let text: &str = self.text;
        let mut kept: Vec<(Span, Node)> = Vec::with_capacity(entries.len());
        for entry in entries {
            match kept.last_mut() {
                Some(last) if span_str(text, last.0) == span_str(text, entry.0) => *last = entry,
                _ => kept.push(entry),
            }
        }
        Ok(Node::Object(kept))
    }
}

/// An object's key, pushed into the text buffer.
struct Key<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = Span;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Span, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = Span;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Span, E> {
        push_checked(self.0, v)
    }
}

/// `v` pushed into the text buffer, unless it holds a NUL character (refused in keys and
/// strings alike, as [`Params::from_value`] refuses it).
fn push_checked<E: de::Error>(text: &mut String, v: &str) -> Result<Span, E> {
    if v.contains('\0') {
        return Err(E::custom("parameters: a NUL character"));
    }
    Ok(push_text(text, v))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::Params;

    /// Writes and reads through `as_json`, as a record does.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Held(#[serde(with = "super")] Params);

    fn parameter_sets() -> Vec<Params> {
        let forms = [
            "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=o-1",
            "expand[]=latest_charge&expand[]=customer&items[0][price]=p1&items[1][price]=p2&z=&a=1",
            "metadata[b]=2&metadata[a]=1&description=caf%C3%A9+%22quoted%22+%5C",
        ];
        let jsons = [
            json!({"amount": 2000, "ratio": 1.5, "big": 18446744073709551615u64, "neg": -3, "ok": true, "none": null}),
            json!({"nested": {"empty": {}, "list": [], "deep": [{"b": "x", "a": [1, "2", false]}]}}),
            json!({}),
        ];
        let mut sets: Vec<Params> = forms.iter().map(|f| Params::from_form(f.as_bytes()).unwrap()).collect();
        sets.extend(jsons.iter().map(|j| Params::from_value(j).unwrap()));
        sets
    }

    #[test]
    fn written_sorted_with_form_values_as_strings_and_json_numbers_as_numbers() {
        let form = Params::from_form(b"metadata[order_id]=o-1&amount=2000&expand[]=latest_charge").unwrap();
        assert_eq!(
            serde_json::to_string(&Held(form)).unwrap(),
            r#"{"amount":"2000","expand":["latest_charge"],"metadata":{"order_id":"o-1"}}"#
        );
        let json = Params::from_value(&json!({"ratio": 1.5, "amount": 2000, "none": null, "ok": true})).unwrap();
        assert_eq!(
            serde_json::to_string(&Held(json)).unwrap(),
            r#"{"amount":2000,"none":null,"ok":true,"ratio":1.5}"#
        );
    }

    #[test]
    fn read_back_as_from_value_reads_the_parse() {
        for params in parameter_sets() {
            let written = serde_json::to_string(&Held(params.clone())).unwrap();
            assert_eq!(written, serde_json::to_string(&params.to_json()).unwrap());
            let read: Held = serde_json::from_str(&written).unwrap();
            let parsed: Value = serde_json::from_str(&written).unwrap();
            let expected = Params::from_value(&parsed).unwrap();
            assert_eq!(read.0, expected, "{written}");
            assert_eq!(read.0, params, "{written}");
            assert_eq!(read.0.to_json(), expected.to_json(), "{written}");
        }
    }

    #[test]
    fn a_key_given_twice_keeps_its_last_value_as_a_parse_does() {
        let text = r#"{"b":"1","a":{"x":"1"},"b":"2","a":{"y":"2"}}"#;
        let read: Held = serde_json::from_str(text).unwrap();
        let parsed = Params::from_value(&serde_json::from_str::<Value>(text).unwrap()).unwrap();
        assert_eq!(read.0.to_json(), parsed.to_json());
        assert_eq!(read.0.to_json(), json!({"a": {"y": "2"}, "b": "2"}));
    }

    #[test]
    fn what_from_value_refuses_is_refused() {
        for bad in [
            r#"{"a":"x\u0000y"}"#.to_string(),
            r#"{"a\u0000":"x"}"#.to_string(),
            r#"["not", "an", "object"]"#.to_string(),
            format!(
                "{{{}}}",
                (0..=super::MAX_PARAMS)
                    .map(|i| format!(r#""k{i}":"v""#))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ] {
            assert!(
                serde_json::from_str::<Held>(&bad).is_err(),
                "{}",
                &bad[..bad.len().min(60)]
            );
        }
    }
}
