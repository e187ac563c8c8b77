//! [`Params`] in the data dir's binary commit records: the text buffer as it is and the
//! tree as a flat list of tokens in pre-order, so that reading it back is one pass with
//! no recursion (a damaged or forged record cannot overflow the stack) and gives the
//! very tree that was written.

use serde::{Deserialize, Serialize};

use super::{span_str, Node, Params, Span};

/// Deepest tree read back: the JSON parser's own limit (a form nests at most
/// [`MAX_DEPTH`](super::MAX_DEPTH)).
const MAX_NESTING: usize = 128;

/// [`Params`] as written: its text, and its tree's tokens.
#[derive(Debug, Serialize, Deserialize)]
pub struct Packed<'a> {
    #[serde(borrow)]
    text: &'a str,
    tokens: Vec<Token>,
}

/// One token of the tree in pre-order: an object is `Object(n)` and then `n` times a
/// `Key` and its value's tokens; a list is `List(n)` and then its `n` items'.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum Token {
    Null,
    Bool(bool),
    Number(Span),
    String(Span),
    Object(u32),
    List(u32),
    Key(Span),
}

impl Params {
    /// The parameters as a binary record writes them.
    pub fn packed(&self) -> Packed<'_> {
        let mut tokens = Vec::with_capacity(2 * self.root.len() + 1);
        tokens.push(Token::Object(self.root.len() as u32));
        let mut todo: Vec<Todo<'_>> = vec![Todo::Entries(&self.root)];
        while let Some(next) = todo.pop() {
            match next {
                Todo::Entries([]) | Todo::Items([]) => {}
                Todo::Entries([(key, value), rest @ ..]) => {
                    tokens.push(Token::Key(*key));
                    todo.push(Todo::Entries(rest));
                    push_node(&mut tokens, &mut todo, value);
                }
                Todo::Items([value, rest @ ..]) => {
                    todo.push(Todo::Items(rest));
                    push_node(&mut tokens, &mut todo, value);
                }
            }
        }
        Packed {
            text: &self.text,
            tokens,
        }
    }

    /// The parameters a binary record holds, checked: every span inside the text on
    /// character boundaries, every container whole, nothing after the tree.
    pub fn unpacked(packed: Packed<'_>) -> Result<Self, &'static str> {
        let Packed { text, tokens } = packed;
        if text.contains('\0') {
            return Err("a NUL character in the parameters");
        }
        let span = |s: Span| {
            let (start, end) = (s.start as usize, s.start as usize + s.len as usize);
            match text.get(start..end) {
                Some(_) => Ok(s),
                None => Err("a parameter outside its text"),
            }
        };
        let mut tokens = tokens.into_iter();
        let Some(Token::Object(n)) = tokens.next() else {
            return Err("parameters that are not an object");
        };
        // The containers being filled, innermost last; a key waits for its value.
        let mut open = vec![Open::new(Kind::Object, n, tokens.len(), None)];
        let mut key: Option<Span> = None;
        loop {
            // Close every full container into its parent (the root ends the tree).
            while open.last().is_some_and(|o| o.left == 0) {
                let full = open.pop().unwrap_or_else(|| unreachable!());
                let (entry_key, node) = full.node();
                match open.last_mut() {
                    Some(parent) => parent.add(text, entry_key, node)?,
                    None => {
                        return match (node, tokens.next()) {
                            (Node::Object(root), None) => Ok(Params {
                                text: text.to_owned(),
                                root,
                            }),
                            _ => Err("tokens after the parameters"),
                        };
                    }
                }
            }
            let Some(token) = tokens.next() else {
                return Err("parameters cut short");
            };
            let node = match token {
                Token::Key(s) if key.is_none() && open.last().is_some_and(|o| o.is_object()) => {
                    key = Some(span(s)?);
                    continue;
                }
                Token::Key(_) => return Err("a parameter name out of place"),
                Token::Null => Node::Null,
                Token::Bool(b) => Node::Bool(b),
                Token::Number(s) => Node::Number(span(s)?),
                Token::String(s) => Node::String(span(s)?),
                Token::Object(_) | Token::List(_) if open.len() >= MAX_NESTING => {
                    return Err("parameters nested too deep");
                }
                Token::Object(n) | Token::List(n) => {
                    let kind = match token {
                        Token::Object(_) => Kind::Object,
                        _ => Kind::List,
                    };
                    open.push(Open::new(kind, n, tokens.len(), key.take()));
                    continue;
                }
            };
            match open.last_mut() {
                Some(parent) => parent.add(text, key.take(), node)?,
                None => return Err("tokens after the parameters"),
            }
        }
    }
}

/// What is left to write of a container.
enum Todo<'a> {
    Entries(&'a [(Span, Node)]),
    Items(&'a [Node]),
}

/// Writes `node`'s own token; a container's children are left to `todo`.
fn push_node<'a>(tokens: &mut Vec<Token>, todo: &mut Vec<Todo<'a>>, node: &'a Node) {
    tokens.push(match node {
        Node::Null => Token::Null,
        Node::Bool(b) => Token::Bool(*b),
        Node::Number(s) => Token::Number(*s),
        Node::String(s) => Token::String(*s),
        Node::Object(entries) => {
            todo.push(Todo::Entries(entries));
            Token::Object(entries.len() as u32)
        }
        Node::List(items) => {
            todo.push(Todo::Items(items));
            Token::List(items.len() as u32)
        }
    });
}

/// A container being read back: what it has, how many children it still expects, and
/// the key it has in its parent (an object's entry).
struct Open {
    children: Children,
    left: u32,
    key: Option<Span>,
}

enum Children {
    Object(Vec<(Span, Node)>),
    List(Vec<Node>),
}

#[derive(Clone, Copy)]
enum Kind {
    Object,
    List,
}

impl Open {
    /// A container of `n` children, with room made for at most 64 of them and no more
    /// than the `left` tokens could hold (a damaged count reserves nothing large; a
    /// bigger container grows as it is read).
    fn new(kind: Kind, n: u32, left: usize, key: Option<Span>) -> Self {
        let room = (n as usize).min(left).min(64);
        let children = match kind {
            Kind::Object => Children::Object(Vec::with_capacity(room)),
            Kind::List => Children::List(Vec::with_capacity(room)),
        };
        Self { children, left: n, key }
    }

    fn is_object(&self) -> bool {
        matches!(self.children, Children::Object(_))
    }

    /// Adds a child; an object's keys must come sorted and unique, as a parse leaves
    /// them (lookups search them by halves).
    fn add(&mut self, text: &str, key: Option<Span>, node: Node) -> Result<(), &'static str> {
        match (&mut self.children, key) {
            (Children::Object(entries), Some(key)) => {
                if entries
                    .last()
                    .is_some_and(|(last, _)| span_str(text, *last) >= span_str(text, key))
                {
                    return Err("parameter names out of order");
                }
                entries.push((key, node))
            }
            (Children::List(items), None) => items.push(node),
            (Children::Object(_), None) => return Err("a parameter without its name"),
            (Children::List(_), Some(_)) => return Err("a parameter name out of place"),
        }
        self.left -= 1;
        Ok(())
    }

    /// The container as a node, with its key in its parent.
    fn node(self) -> (Option<Span>, Node) {
        let node = match self.children {
            Children::Object(entries) => Node::Object(entries),
            Children::List(items) => Node::List(items),
        };
        (self.key, node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(params: &Params) -> Params {
        let bytes = postcard::to_allocvec(&params.packed()).unwrap();
        Params::unpacked(postcard::from_bytes(&bytes).unwrap()).unwrap()
    }

    #[test]
    fn forms_and_json_come_back_as_the_same_tree() {
        let form = Params::from_form(
            b"amount=2000&currency=usd&confirm=true&metadata[order_id]=o-1&metadata[note]=caf%C3%A9&expand[]=latest_charge&expand[]=customer&items[0][price]=p_1&items[0][quantity]=2&empty=",
        )
        .unwrap();
        let json = Params::from_json(
            br#"{"a":null,"b":true,"c":1.5e3,"d":"x","e":{},"f":[],"g":[{"h":[1,[2,{"i":"j"}]]}],"k":{"l":{"m":"n"}}}"#,
        )
        .unwrap();
        for params in [form, json, Params::default()] {
            let back = round_trip(&params);
            assert_eq!(back.to_json(), params.to_json());
            assert_eq!(back.canonical(), params.canonical());
            assert_eq!(back.text, params.text, "the text as it was");
        }
    }

    #[test]
    fn a_damaged_tree_is_refused_not_read_wrong_or_panicked_on() {
        let text = "abcé";
        let packed = |tokens: Vec<Token>| Params::unpacked(Packed { text, tokens });
        let s = |start, len| Span { start, len };
        use Token::*;
        assert!(packed(vec![Object(1), Key(s(0, 1)), String(s(1, 1))]).is_ok());
        for (tokens, why) in [
            (vec![], "parameters that are not an object"),
            (vec![List(0)], "parameters that are not an object"),
            (vec![Object(1), Key(s(0, 1))], "parameters cut short"),
            (vec![Object(1), String(s(0, 1))], "a parameter without its name"),
            (
                vec![Object(1), Key(s(0, 1)), Key(s(0, 1))],
                "a parameter name out of place",
            ),
            (
                vec![Object(1), Key(s(0, 1)), List(1), Key(s(0, 1))],
                "a parameter name out of place",
            ),
            (vec![Object(1), Key(s(0, 9)), Null], "a parameter outside its text"),
            (vec![Object(1), Key(s(0, 4)), Null], "a parameter outside its text"), // inside 'é'
            (vec![Object(0), Null], "tokens after the parameters"),
            (
                vec![Object(2), Key(s(1, 1)), Null, Key(s(0, 1)), Null],
                "parameter names out of order",
            ),
            (
                vec![Object(2), Key(s(0, 1)), Null, Key(s(0, 1)), Null],
                "parameter names out of order",
            ),
            (vec![Object(u32::MAX)], "parameters cut short"),
        ] {
            assert_eq!(packed(tokens).unwrap_err(), why);
        }
        assert_eq!(
            Params::unpacked(Packed {
                text: "a\0",
                tokens: vec![Object(0)]
            })
            .unwrap_err(),
            "a NUL character in the parameters"
        );
        let deep: Vec<Token> = [Object(1)]
            .into_iter()
            .chain((0..200).flat_map(|_| [Key(s(0, 1)), Object(1)]))
            .collect();
        assert_eq!(packed(deep).unwrap_err(), "parameters nested too deep");
    }
}
