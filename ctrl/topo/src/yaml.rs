//! A YAML document as a tree of nodes that remember where they came from.
//!
//! We do not deserialize straight into structs: an engineer editing a
//! topology by hand wants *every* mistake reported with its line and column,
//! not just the first one serde trips over. So the file is first read into
//! this positioned tree, with hard limits on depth, node count and alias
//! expansion, and then decoded field by field (see `decode`).

use std::collections::HashMap;
use std::fmt;

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Deepest nesting accepted. Topology files need about 5 levels.
pub const MAX_DEPTH: usize = 64;
/// Most nodes (scalars, sequences, mappings) in one document, counting
/// every alias expansion, so that "billion laughs" documents stop early.
pub const MAX_NODES: usize = 4_000_000;

/// A 1-based line and column in the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl Pos {
    fn from_marker(m: &Marker) -> Self {
        // yaml-rust2 reports 1-based lines and 0-based columns.
        Pos {
            line: u32::try_from(m.line()).unwrap_or(u32::MAX),
            col: u32::try_from(m.col()).unwrap_or(u32::MAX).saturating_add(1),
        }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// What a node holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `~`, `null` or nothing at all.
    Null,
    /// A scalar's text; `quoted` is true for '...' and "..." and block scalars.
    Scalar {
        text: String,
        quoted: bool,
    },
    Seq(Vec<Node>),
    /// Keys are kept in document order; duplicates are rejected while reading.
    Map(Vec<(Node, Node)>),
}

/// One node of the document with the position where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub pos: Pos,
    pub value: Value,
}

impl Node {
    /// A short name for the node's kind, used in "expected X, found Y".
    pub fn kind(&self) -> &'static str {
        match &self.value {
            Value::Null => "nothing",
            Value::Scalar { .. } => "a scalar",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }

    /// The scalar's text, if this is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// Why a document could not be read into a tree.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub pos: Pos,
    pub message: String,
}

/// Parses a single YAML document. An empty document gives a `Null` node.
pub fn parse(text: &str) -> Result<Node, ParseError> {
    let mut builder = Builder { parser: Parser::new_from_str(text), anchors: HashMap::new(), nodes: 0 };
    builder.document()
}

struct Builder<'a> {
    parser: Parser<std::str::Chars<'a>>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
}

enum Frame {
    Seq { pos: Pos, anchor: usize, items: Vec<Node> },
    Map { pos: Pos, anchor: usize, entries: Vec<(Node, Node)>, key: Option<Node> },
}

impl Builder<'_> {
    fn next(&mut self) -> Result<(Event, Pos), ParseError> {
        match self.parser.next_token() {
            Ok((ev, mark)) => Ok((ev, Pos::from_marker(&mark))),
            Err(e) => Err(ParseError {
                pos: Pos::from_marker(e.marker()),
                message: format!("YAML syntax error: {}", e.info()),
            }),
        }
    }

    fn count(&mut self, n: usize, pos: Pos) -> Result<(), ParseError> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_NODES {
            return Err(ParseError {
                pos,
                message: format!(
                    "document has more than {MAX_NODES} nodes (after expanding aliases); \
                     split it or remove repeated aliases"
                ),
            });
        }
        Ok(())
    }

    fn document(&mut self) -> Result<Node, ParseError> {
        let mut root: Option<Node> = None;
        let mut stack: Vec<Frame> = Vec::new();
        loop {
            let (ev, pos) = self.next()?;
            let finished: Option<Node> = match ev {
                Event::StreamStart | Event::DocumentStart | Event::Nothing => None,
                Event::DocumentEnd | Event::StreamEnd => {
                    if ev == Event::StreamEnd || root.is_some() {
                        break;
                    }
                    None
                }
                Event::Scalar(text, style, anchor, _tag) => {
                    self.count(1, pos)?;
                    let plain = style == TScalarStyle::Plain;
                    let value = if plain && matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL") {
                        Value::Null
                    } else {
                        Value::Scalar { text, quoted: !plain }
                    };
                    let node = Node { pos, value };
                    if anchor != 0 {
                        self.anchors.insert(anchor, node.clone());
                    }
                    Some(node)
                }
                Event::Alias(id) => {
                    let node = self.anchors.get(&id).cloned().ok_or_else(|| ParseError {
                        pos,
                        message: "alias refers to an unknown anchor".into(),
                    })?;
                    self.count(count_nodes(&node), pos)?;
                    Some(Node { pos, value: node.value })
                }
                Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                    self.count(1, pos)?;
                    if stack.len() >= MAX_DEPTH {
                        return Err(ParseError {
                            pos,
                            message: format!("nesting deeper than {MAX_DEPTH} levels"),
                        });
                    }
                    stack.push(if matches!(ev, Event::SequenceStart(..)) {
                        Frame::Seq { pos, anchor, items: Vec::new() }
                    } else {
                        Frame::Map { pos, anchor, entries: Vec::new(), key: None }
                    });
                    None
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    let (node, anchor) = match stack.pop() {
                        Some(Frame::Seq { pos, anchor, items }) => {
                            (Node { pos, value: Value::Seq(items) }, anchor)
                        }
                        Some(Frame::Map { pos, anchor, entries, .. }) => {
                            (Node { pos, value: Value::Map(entries) }, anchor)
                        }
                        None => {
                            return Err(ParseError { pos, message: "unbalanced end of collection".into() })
                        }
                    };
                    if anchor != 0 {
                        self.anchors.insert(anchor, node.clone());
                    }
                    Some(node)
                }
            };
            let Some(node) = finished else { continue };
            match stack.last_mut() {
                None => {
                    root = Some(node);
                }
                Some(Frame::Seq { items, .. }) => items.push(node),
                Some(Frame::Map { entries, key, .. }) => match key.take() {
                    None => {
                        if !matches!(node.value, Value::Scalar { .. }) {
                            return Err(ParseError {
                                pos: node.pos,
                                message: format!("mapping keys must be plain text, found {}", node.kind()),
                            });
                        }
                        if let Some((first, _)) = entries.iter().find(|(k, _)| k.value == node.value) {
                            return Err(ParseError {
                                pos: node.pos,
                                message: format!(
                                    "duplicate key \"{}\" (first used at line {})",
                                    node.as_str().unwrap_or_default(),
                                    first.pos.line
                                ),
                            });
                        }
                        *key = Some(node);
                    }
                    Some(k) => entries.push((k, node)),
                },
            }
        }
        Ok(root.unwrap_or(Node { pos: Pos { line: 1, col: 1 }, value: Value::Null }))
    }
}

fn count_nodes(node: &Node) -> usize {
    let mut n = 0usize;
    let mut todo = vec![node];
    while let Some(node) = todo.pop() {
        n += 1;
        match &node.value {
            Value::Seq(items) => todo.extend(items.iter()),
            Value::Map(entries) => todo.extend(entries.iter().flat_map(|(k, v)| [k, v])),
            _ => {}
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(node: &Node) -> &str {
        node.as_str().unwrap_or("<not a scalar>")
    }

    #[test]
    fn positions_are_one_based() {
        let doc = parse("a: 1\nlist:\n  - x\n  - {k: v}\n").unwrap();
        let Value::Map(entries) = &doc.value else { panic!("not a map") };
        assert_eq!(entries[0].0.pos, Pos { line: 1, col: 1 });
        assert_eq!(entries[0].1.pos, Pos { line: 1, col: 4 });
        let Value::Seq(items) = &entries[1].1.value else { panic!("not a seq") };
        assert_eq!(items[0].pos, Pos { line: 3, col: 5 });
        assert_eq!(scalar(&items[0]), "x");
        assert_eq!(items[1].pos.line, 4);
    }

    #[test]
    fn nulls_and_quoted_scalars() {
        let doc = parse("a: ~\nb:\nc: 'null'\nd: \"3\"\n").unwrap();
        let Value::Map(e) = &doc.value else { panic!("not a map") };
        assert_eq!(e[0].1.value, Value::Null);
        assert_eq!(e[1].1.value, Value::Null);
        assert_eq!(e[2].1.value, Value::Scalar { text: "null".into(), quoted: true });
        assert_eq!(e[3].1.value, Value::Scalar { text: "3".into(), quoted: true });
    }

    #[test]
    fn empty_document_is_null() {
        assert_eq!(parse("").unwrap().value, Value::Null);
        assert_eq!(parse("# only a comment\n").unwrap().value, Value::Null);
    }

    #[test]
    fn duplicate_keys_are_rejected_with_both_lines() {
        let err = parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(err.pos.line, 3);
        assert!(err.message.contains("duplicate key \"a\" (first used at line 1)"), "{}", err.message);
    }

    #[test]
    fn syntax_errors_have_positions() {
        let err = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.message.starts_with("YAML syntax error"), "{}", err.message);
        assert!(err.pos.line >= 1);
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let text = "[".repeat(100_000);
        let err = parse(&text).unwrap_err();
        // The scanner may stop it before our own depth limit does.
        assert!(
            err.message.contains("nesting deeper than 64") || err.message.contains("recursion limit"),
            "{}",
            err.message
        );
        let text = format!("{}1{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains("nesting deeper than 64"), "{}", err.message);
        let text = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(&text).is_ok());
    }

    #[test]
    fn alias_bombs_are_bounded() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains("more than"), "{}", err.message);
    }

    #[test]
    fn aliases_expand() {
        let doc = parse("d: &d {bandwidth: 10Gbps}\nl: *d\n").unwrap();
        let Value::Map(e) = &doc.value else { panic!("not a map") };
        assert_eq!(e[0].1.value, e[1].1.value);
        assert_eq!(e[1].1.pos.line, 2);
    }

    #[test]
    fn non_scalar_keys_are_rejected() {
        let err = parse("? [a, b]\n: 1\n").unwrap_err();
        assert!(err.message.contains("mapping keys must be plain text"), "{}", err.message);
    }
}
