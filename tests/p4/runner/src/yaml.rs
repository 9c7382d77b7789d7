//! Reading the vector files: a YAML node that knows its file and path, so
//! every error says where it is, and the value syntax shared by table
//! entries and packet fields (integers, `0x` hex, IPv4, MAC).

use std::fmt;
use std::net::Ipv4Addr;

use yaml_rust2::Yaml;

/// Something wrong in a vector file, with where it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {path}: {message}")]
pub struct VectorError {
    pub file: String,
    pub path: String,
    pub message: String,
}

/// A YAML node with its location.
#[derive(Clone)]
pub struct Node<'a> {
    pub y: &'a Yaml,
    pub file: &'a str,
    path: String,
}

impl fmt::Debug for Node<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.path)
    }
}

impl<'a> Node<'a> {
    pub fn root(y: &'a Yaml, file: &'a str) -> Self {
        Node { y, file, path: "$".into() }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn err(&self, message: impl Into<String>) -> VectorError {
        VectorError { file: self.file.to_owned(), path: self.path.clone(), message: message.into() }
    }

    fn child(&self, y: &'a Yaml, seg: String) -> Node<'a> {
        Node { y, file: self.file, path: format!("{}{}", self.path, seg) }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.y, Yaml::Null | Yaml::BadValue)
    }

    pub fn get(&self, key: &str) -> Option<Node<'a>> {
        match self.y {
            Yaml::Hash(h) => h.get(&Yaml::String(key.to_owned())).map(|v| self.child(v, format!(".{key}"))),
            _ => None,
        }
    }

    pub fn req(&self, key: &str) -> Result<Node<'a>, VectorError> {
        self.map_entries()?;
        self.get(key).ok_or_else(|| self.err(format!("missing key `{key}`")))
    }

    /// The entries of a mapping, keys as strings.
    pub fn map_entries(&self) -> Result<Vec<(String, Node<'a>)>, VectorError> {
        match self.y {
            Yaml::Hash(h) => h
                .iter()
                .map(|(k, v)| {
                    let key = scalar_text(k).ok_or_else(|| self.err("mapping keys must be scalars"))?;
                    Ok((key.clone(), self.child(v, format!(".{key}"))))
                })
                .collect(),
            _ => Err(self.err("expected a mapping")),
        }
    }

    /// Fails on keys outside `allowed`, naming the closest one.
    pub fn only(&self, allowed: &[&str]) -> Result<(), VectorError> {
        for (k, n) in self.map_entries()? {
            if !allowed.contains(&k.as_str()) {
                return Err(n.err(format!("unknown key `{k}`; expected one of {}", allowed.join(", "))));
            }
        }
        Ok(())
    }

    pub fn list(&self) -> Result<Vec<Node<'a>>, VectorError> {
        match self.y {
            Yaml::Array(a) => {
                Ok(a.iter().enumerate().map(|(i, v)| self.child(v, format!("[{i}]"))).collect())
            }
            _ => Err(self.err("expected a list")),
        }
    }

    /// A list, or a single item taken as a one-item list.
    pub fn list_or_one(&self) -> Vec<Node<'a>> {
        self.list().unwrap_or_else(|_| vec![self.clone()])
    }

    pub fn str(&self) -> Result<&'a str, VectorError> {
        match self.y {
            Yaml::String(s) => Ok(s),
            _ => Err(self.err("expected a string")),
        }
    }

    pub fn text(&self) -> Result<String, VectorError> {
        scalar_text(self.y).ok_or_else(|| self.err("expected a scalar"))
    }

    pub fn bool(&self) -> Result<bool, VectorError> {
        match self.y {
            Yaml::Boolean(b) => Ok(*b),
            _ => Err(self.err("expected true or false")),
        }
    }

    pub fn u64(&self) -> Result<u64, VectorError> {
        let v = self.uint(64)?;
        u64::try_from(v).map_err(|_| self.err("value does not fit 64 bits"))
    }

    /// An unsigned value of at most `width` bits, in any value syntax.
    pub fn uint(&self, width: u32) -> Result<u128, VectorError> {
        let t = self.text()?;
        let v = parse_value(&t).map_err(|m| self.err(m))?;
        if width < 128 && v >> width != 0 {
            return Err(self.err(format!("{t} does not fit in {width} bits")));
        }
        Ok(v)
    }

    /// A range `{min, max}`, an exact number, or `"*"`.
    pub fn range(&self) -> Result<Range, VectorError> {
        if self.text().ok().as_deref() == Some("*") {
            return Ok(Range { min: 0, max: u128::MAX });
        }
        if let Yaml::Hash(_) = self.y {
            self.only(&["min", "max"])?;
            let min = self.get("min").map(|n| n.uint(128)).transpose()?.unwrap_or(0);
            let max = self.get("max").map(|n| n.uint(128)).transpose()?.unwrap_or(u128::MAX);
            if min > max {
                return Err(self.err("min > max"));
            }
            return Ok(Range { min, max });
        }
        if let Yaml::Array(a) = self.y {
            if a.len() == 2 {
                let l = self.list()?;
                return Ok(Range { min: l[0].uint(128)?, max: l[1].uint(128)? });
            }
        }
        let v = self.uint(128)?;
        Ok(Range { min: v, max: v })
    }
}

/// An inclusive range of acceptable values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub min: u128,
    pub max: u128,
}

impl Range {
    pub fn exact(v: u128) -> Self {
        Range { min: v, max: v }
    }
    pub fn contains(&self, v: u128) -> bool {
        self.min <= v && v <= self.max
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max) {
            (a, b) if a == b => write!(f, "{a}"),
            (0, u128::MAX) => write!(f, "any"),
            (a, u128::MAX) => write!(f, ">= {a}"),
            (0, b) => write!(f, "<= {b}"),
            (a, b) => write!(f, "{a}..={b}"),
        }
    }
}

fn scalar_text(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Parses `123`, `0x1f`, `0b101`, `10.0.0.1` or `02:00:00:00:00:01`.
pub fn parse_value(t: &str) -> Result<u128, String> {
    let t = t.trim();
    let bad = || format!("`{t}` is not a number, 0x hex, IPv4 address or MAC address");
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        let h: String = h.chars().filter(|c| *c != '_').collect();
        if h.is_empty() || h.len() > 32 {
            return Err(bad());
        }
        return u128::from_str_radix(&h, 16).map_err(|_| bad());
    }
    if let Some(b) = t.strip_prefix("0b") {
        return u128::from_str_radix(&b.replace('_', ""), 2).map_err(|_| bad());
    }
    if t.contains(':') {
        let parts: Vec<&str> = t.split(':').collect();
        if parts.len() != 6 {
            return Err(bad());
        }
        return parts.iter().try_fold(0u128, |acc, p| {
            if p.len() != 2 {
                return Err(bad());
            }
            u8::from_str_radix(p, 16).map(|b| (acc << 8) | u128::from(b)).map_err(|_| bad())
        });
    }
    if t.contains('.') {
        return t.parse::<Ipv4Addr>().map(|a| u128::from(u32::from(a))).map_err(|_| bad());
    }
    t.replace('_', "").parse::<u128>().map_err(|_| bad())
}

/// Parses a hex byte string, allowing spaces and `_` between bytes.
pub fn parse_hex(t: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<char> = t.chars().filter(|c| !c.is_whitespace() && *c != '_').collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("hex string has an odd number of digits ({})", digits.len()));
    }
    digits
        .chunks(2)
        .map(|p| {
            let s: String = p.iter().collect();
            u8::from_str_radix(&s, 16).map_err(|_| format!("`{s}` is not a hex byte"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(parse_value("4791"), Ok(4791));
        assert_eq!(parse_value("0xF400"), Ok(0xf400));
        assert_eq!(parse_value("10.0.2.1"), Ok(0x0a00_0201));
        assert_eq!(parse_value("02:00:00:00:00:01"), Ok(0x0200_0000_0001));
        assert!(parse_value("10.0.2").is_err());
        assert!(parse_value("zz").is_err());
        assert_eq!(parse_hex("0a 0b_0c"), Ok(vec![10, 11, 12]));
        assert!(parse_hex("abc").is_err());
    }
}
