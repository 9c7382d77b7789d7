//! The layout of bfas's `tofino.bin`, enough to tell a whole one from a cut
//! one and to read its header: a sequence of records, each a 4-byte tag
//! (three zero bytes and a letter) and a body whose size the record gives.
//!
//! - `H` (header) and `C` (context): a BSON document (little-endian i32
//!   length, counting itself, elements, a zero byte). The header names the
//!   program (`program_name`) and the compile (`run_id`, also in
//!   `context.json`).
//! - `P`: a parser handle, 4 bytes.
//! - `R`: one register, a 4-byte address and a 4-byte value.
//! - `B`, `D`: a block, an 8-byte address, a u32 width in bits, a u32
//!   count, and `count * width / 8` bytes.
//! - `S`: a scan set, an 8-byte select address, a 4-byte select value, an
//!   8-byte address, a u32 width, a u32 count, and `count * width / 8`
//!   bytes.
//!
//! (As bf-asm's own dumper, `bfdumpbin`, reads them.) A file cut inside a
//! record is refused; one cut exactly between two records cannot be told
//! from a whole one by its bytes alone.

/// What the header says, where it says it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct BinHeader {
    pub program_name: Option<String>,
    pub run_id: Option<String>,
}

/// Where and why the bytes are not a whole `tofino.bin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BinError {
    pub offset: usize,
    pub what: String,
}

fn err(offset: usize, what: impl Into<String>) -> BinError {
    BinError { offset, what: what.into() }
}

/// A little reader that names the offset of what it could not read.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], BinError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or_else(|| {
            err(self.at, format!("{what} needs {n} bytes, {} left", self.bytes.len() - self.at))
        })?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32, BinError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Walks every record; the header's fields if it has one.
pub(crate) fn scan(bytes: &[u8]) -> Result<BinHeader, BinError> {
    let mut c = Cursor { bytes, at: 0 };
    let mut header = None;
    if bytes.is_empty() {
        return Err(err(0, "no records"));
    }
    while c.at < bytes.len() {
        let start = c.at;
        let tag = c.take(4, "a record's tag")?;
        if tag[..3] != [0, 0, 0] {
            return Err(err(start, format!("no record tag ({:02x?})", tag)));
        }
        match tag[3] {
            b'H' | b'C' => {
                let len = c.u32("a document's length")? as usize;
                if len < 5 {
                    return Err(err(start + 4, format!("a document of {len} bytes")));
                }
                c.at -= 4;
                let doc = c.take(len, "a document")?;
                if doc[len - 1] != 0 {
                    return Err(err(start + 4, "a document without its final zero byte"));
                }
                if tag[3] == b'H' && header.is_none() {
                    header = Some(read_header(doc));
                }
            }
            b'P' => {
                c.take(4, "a parser handle")?;
            }
            b'R' => {
                c.take(8, "a register write")?;
            }
            b'B' | b'D' => {
                c.take(8, "a block's address")?;
                block(&mut c)?;
            }
            b'S' => {
                c.take(20, "a scan set's addresses")?;
                block(&mut c)?;
            }
            other => return Err(err(start, format!("an unknown record {:?}", other as char))),
        }
    }
    header.ok_or_else(|| err(0, "no header record"))
}

/// A block's width, count and data.
fn block(c: &mut Cursor<'_>) -> Result<(), BinError> {
    let at = c.at;
    let width = u64::from(c.u32("a block's width")?);
    let count = u64::from(c.u32("a block's count")?);
    let bits = width * count;
    if bits % 8 != 0 {
        return Err(err(at, format!("a block of {count} x {width} bits, not whole bytes")));
    }
    let len = usize::try_from(bits / 8).map_err(|_| err(at, "a block too large"))?;
    c.take(len, "a block's data")?;
    Ok(())
}

/// The header's string fields (a BSON document whose length was checked);
/// stops at the first element type it does not know.
fn read_header(doc: &[u8]) -> BinHeader {
    let mut out = BinHeader::default();
    let mut c = Cursor { bytes: &doc[..doc.len() - 1], at: 4 };
    while c.at < c.bytes.len() {
        let Ok(kind) = c.take(1, "an element type") else { break };
        let Some(name_len) = c.bytes[c.at..].iter().position(|&b| b == 0) else { break };
        let name = String::from_utf8_lossy(&c.bytes[c.at..c.at + name_len]).into_owned();
        c.at += name_len + 1;
        let skip = match kind[0] {
            0x02 => {
                let Ok(len) = c.u32("a string's length") else { break };
                let Ok(s) = c.take(len as usize, "a string") else { break };
                let value = String::from_utf8_lossy(s.strip_suffix(&[0]).unwrap_or(s)).into_owned();
                match name.as_str() {
                    "program_name" => out.program_name = Some(value),
                    "run_id" => out.run_id = Some(value),
                    _ => {}
                }
                0
            }
            0x08 => 1,
            0x10 => 4,
            0x01 | 0x09 | 0x11 | 0x12 => 8,
            0x0a => 0,
            0x03 | 0x04 => match c.u32("a sub-document's length") {
                Ok(len) => (len as usize).saturating_sub(4),
                Err(_) => break,
            },
            _ => break,
        };
        if c.take(skip, "a value").is_err() {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut body = Vec::new();
        for (k, v) in fields {
            body.push(0x02);
            body.extend_from_slice(k.as_bytes());
            body.push(0);
            body.extend_from_slice(&(v.len() as u32 + 1).to_le_bytes());
            body.extend_from_slice(v.as_bytes());
            body.push(0);
        }
        let mut out = ((body.len() + 5) as u32).to_le_bytes().to_vec();
        out.extend(body);
        out.push(0);
        out
    }

    fn sample() -> Vec<u8> {
        let mut b = vec![0, 0, 0, b'H'];
        b.extend(doc(&[("program_name", "main"), ("run_id", "42")]));
        b.extend_from_slice(&[0, 0, 0, b'R', 1, 0, 0, 0, 2, 0, 0, 0]);
        b.extend_from_slice(&[0, 0, 0, b'D']);
        b.extend_from_slice(&7u64.to_le_bytes());
        b.extend_from_slice(&64u32.to_le_bytes());
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&[9; 24]);
        b
    }

    #[test]
    fn a_whole_binary_gives_its_header() {
        let h = scan(&sample()).unwrap();
        assert_eq!(h.program_name.as_deref(), Some("main"));
        assert_eq!(h.run_id.as_deref(), Some("42"));
    }

    #[test]
    fn every_cut_inside_a_record_is_refused() {
        let b = sample();
        let header_end = 4 + u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
        // Whole records end here: a cut there leaves a shorter whole file.
        let boundaries = [header_end, header_end + 12];
        for cut in 0..b.len() {
            if boundaries.contains(&cut) {
                continue;
            }
            assert!(scan(&b[..cut]).is_err(), "cut at {cut} accepted");
        }
    }

    #[test]
    fn no_header_or_a_stray_tag_is_refused() {
        let b = sample();
        let header_end = 4 + u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
        assert!(scan(&b[header_end..]).unwrap_err().what.contains("no header"));
        let mut bad = b.clone();
        bad[header_end] = 1;
        assert!(scan(&bad).unwrap_err().what.contains("no record tag"));
        let mut unknown = b;
        unknown[header_end + 3] = b'Z';
        assert!(scan(&unknown).unwrap_err().what.contains("unknown record"));
    }
}
