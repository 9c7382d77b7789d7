//! A bounds-checked big-endian reader over untrusted bytes. Every read
//! names the header it belongs to, so a short input becomes a
//! [`ReportError::Truncated`] that says what was cut and where, never a
//! panic.

use crate::report::ReportError;

#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Offset of `buf[0]` in the caller's input, so errors from a nested
    /// decode (the UDP payload inside a frame) point into the whole input.
    base: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8], base: usize) -> Self {
        Cursor { buf, pos: 0, base }
    }

    /// Offset of the next byte, in the caller's input.
    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes, which belong to `what`.
    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ReportError> {
        let available = self.remaining();
        if n > available {
            return Err(ReportError::Truncated { what, offset: self.offset(), needed: n, available });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// A cursor over the next `n` bytes (a header with a length field),
    /// consumed from this one.
    pub(crate) fn sub(&mut self, n: usize, what: &'static str) -> Result<Cursor<'a>, ReportError> {
        let base = self.offset();
        let buf = self.take(n, what)?;
        Ok(Cursor { buf, pos: 0, base })
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, ReportError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Reads a header of `N` bytes at once, so its fields can be sliced out
/// without further length checks.
pub(crate) fn header<const N: usize>(c: &mut Cursor<'_>, what: &'static str) -> Result<[u8; N], ReportError> {
    let b = c.take(N, what)?;
    let mut out = [0u8; N];
    out.copy_from_slice(b);
    Ok(out)
}

pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_and_reports_truncation_with_offset() {
        let data = [0u8, 1, 2, 3, 4, 5, 6, 7, 8];
        let mut c = Cursor::new(&data, 100);
        assert_eq!(c.take(1, "a").unwrap(), &[0]);
        assert_eq!(c.u32("b").unwrap(), 0x0102_0304);
        assert_eq!(c.offset(), 105);
        let mut inner = c.sub(2, "sub").unwrap();
        assert_eq!(inner.offset(), 105);
        let err = inner.u32("the thing").unwrap_err();
        assert_eq!(err, ReportError::Truncated { what: "the thing", offset: 105, needed: 4, available: 2 });
        assert_eq!(c.remaining(), 2);
        assert_eq!(header::<2>(&mut c, "h").unwrap(), [7, 8]);
    }
}
