//! The BMv2 device config pushed without the whitespace p4c indents it
//! with: the same JSON document in a sixth of the bytes.
//!
//! p4c writes its BMv2 JSON indented (`p4src/build/main.json`: 2.4 MB, of
//! which 425 KB is content), and a pipeline push carries it whole to every
//! switch. At fabric scale those bytes are the push's cost: encoding,
//! the management network, the switch's receive and parse. Whitespace
//! between JSON tokens means nothing to a parser, so the push carries the
//! document without it. Whitespace inside strings is kept.

/// `text` without the whitespace between its JSON tokens. For valid JSON
/// the result parses to the same document (in valid JSON, no two tokens
/// that whitespace separates would run together without it: numbers and
/// literals are always followed by `,`, `:`, `]`, `}` or the end). Bytes
/// inside strings, escapes included, are copied as they are.
pub fn compact_json(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() / 4);
    let mut strings = Strings::default();
    for &b in text {
        if strings.inside(b) || !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            out.push(b);
        }
    }
    out
}

/// Tells, byte by byte, whether a JSON text is inside a string (its
/// quotes included, escapes followed).
#[derive(Debug, Default)]
struct Strings {
    in_string: bool,
    escaped: bool,
}

impl Strings {
    /// Whether `b`, the next byte, belongs to a string (either quote
    /// included).
    fn inside(&mut self, b: u8) -> bool {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            true
        } else {
            self.in_string = b == b'"';
            self.in_string
        }
    }
}

/// How deep a device config's JSON may nest. p4c's BMv2 JSON for
/// `p4src/` nests 413 deep (expression trees), past serde_json's default
/// limit of 128.
pub const MAX_DEPTH: usize = 4096;

/// The stack of the thread that checks the JSON: room for [`MAX_DEPTH`]
/// levels of the recursive parser, in debug builds too.
const CHECK_STACK: usize = 256 << 20;

/// Why a device config is not JSON.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("it nests {depth} deep, more than the {MAX_DEPTH} a device config may")]
    TooDeep { depth: usize },
    #[error("{0}")]
    Syntax(#[from] serde_json::Error),
    #[error("cannot start the thread that checks it: {0}")]
    Thread(#[from] std::io::Error),
}

/// Checks that `text` is one JSON document, however deep it nests (up to
/// [`MAX_DEPTH`]); the error says where it is not.
pub fn check_json(text: &[u8]) -> Result<(), JsonError> {
    parse_deep::<serde::de::IgnoredAny>(text).map(|_| ())
}

/// `text` as one `T`, nested up to [`MAX_DEPTH`] deep. The parser
/// recurses once per level: it runs on a stack of its own, sized for
/// MAX_DEPTH, whichever thread loads the program.
fn parse_deep<T: serde::de::DeserializeOwned + Send>(text: &[u8]) -> Result<T, JsonError> {
    let depth = max_depth(text);
    if depth > MAX_DEPTH {
        return Err(JsonError::TooDeep { depth });
    }
    let parse = || -> Result<T, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_slice(text);
        de.disable_recursion_limit();
        let value = T::deserialize(&mut de)?;
        de.end()?;
        Ok(value)
    };
    std::thread::scope(|s| {
        let checker = std::thread::Builder::new().name("json-check".into()).stack_size(CHECK_STACK);
        let joined = checker.spawn_scoped(s, parse)?.join();
        // The parser returns errors; a panic in it is a bug, passed on.
        joined.unwrap_or_else(|p| std::panic::resume_unwind(p)).map_err(JsonError::from)
    })
}

/// The deepest nesting of `[` and `{` outside strings.
fn max_depth(text: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut strings = Strings::default();
    for &b in text {
        if strings.inside(b) {
            continue;
        }
        match b {
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same_document(a: &[u8], b: &[u8]) {
        assert_eq!(parse_deep::<serde_json::Value>(a).unwrap(), parse_deep::<serde_json::Value>(b).unwrap());
    }

    #[test]
    fn check_json_takes_deep_documents_and_says_where_others_fail() {
        check_json(crate::builtin::BMV2_JSON).unwrap();
        assert_eq!(max_depth(crate::builtin::BMV2_JSON), 413, "p4c's JSON nests past serde_json's 128");
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        check_json(deep.as_bytes()).unwrap();
        let deeper = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(
            matches!(check_json(deeper.as_bytes()), Err(JsonError::TooDeep { depth }) if depth == MAX_DEPTH + 1)
        );
        let err = check_json(b"{\"a\": [1, 2,\n  }").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(matches!(check_json(b"{} {}"), Err(JsonError::Syntax(_))), "one document only");
        assert!(matches!(check_json(b"\"[[[\""), Ok(())), "brackets in strings do not nest");
    }

    #[test]
    fn whitespace_between_tokens_goes_and_strings_keep_theirs() {
        let text = br#"{
  "name" : "a b\t c",
  "quote" : "say \"hi there\" \\",
  "n" : [ 1 , -2.5e3 , true , null ],
  "o" : { "k" : " " }
}"#;
        let compact = compact_json(text);
        assert_eq!(
            std::str::from_utf8(&compact).unwrap(),
            r#"{"name":"a b\t c","quote":"say \"hi there\" \\","n":[1,-2.5e3,true,null],"o":{"k":" "}}"#
        );
        same_document(text, &compact);
        assert_eq!(compact_json(&compact), compact, "compact JSON stays as it is");
        assert!(compact_json(b"").is_empty());
    }

    #[test]
    fn the_committed_build_is_the_same_document_in_a_fraction_of_the_bytes() {
        let text = crate::builtin::BMV2_JSON;
        let compact = compact_json(text);
        same_document(text, &compact);
        assert!(compact.len() * 3 < text.len(), "{} of {} bytes", compact.len(), text.len());
    }
}
