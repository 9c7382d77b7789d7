//! Seed lists as people write them: a range `1-20`, a list `1,5,9`, or
//! both `1-10,42`. One reader for `sim sweep --seeds`, `sim suite
//! --seeds` and a family's `seeds:`.

/// Most seeds one list holds.
pub const MAX_SEEDS: usize = 10_000;

/// Why a seed list cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeedsError {
    #[error("\"{0}\" is not a seed (a whole number)")]
    NotASeed(String),
    #[error("range {0} runs backwards; write it low-high")]
    Backwards(String),
    #[error("range {0} is more than {MAX_SEEDS} seeds")]
    RangeTooLong(String),
    #[error("no seed given; write a range like 1-20 or a list like 1,5,9")]
    Empty,
    #[error("{0} seeds is more than the limit of {MAX_SEEDS}")]
    TooMany(usize),
}

/// The seeds `text` names, ascending, each once.
pub fn parse(text: &str) -> Result<Vec<u64>, SeedsError> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |s: &str| s.trim().parse::<u64>().map_err(|_| SeedsError::NotASeed(s.trim().to_owned()));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a {
                    return Err(SeedsError::Backwards(part.to_owned()));
                }
                if b - a >= MAX_SEEDS as u64 {
                    return Err(SeedsError::RangeTooLong(part.to_owned()));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    match out.len() {
        0 => Err(SeedsError::Empty),
        n if n > MAX_SEEDS => Err(SeedsError::TooMany(n)),
        _ => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_ranges_and_lists() {
        assert_eq!(parse("1-4"), Ok(vec![1, 2, 3, 4]));
        assert_eq!(parse("9, 1-2,2"), Ok(vec![1, 2, 9]));
        assert_eq!(parse("5-1"), Err(SeedsError::Backwards("5-1".into())));
        assert_eq!(parse("x"), Err(SeedsError::NotASeed("x".into())));
        assert_eq!(parse(""), Err(SeedsError::Empty));
        assert_eq!(parse("1-100000"), Err(SeedsError::RangeTooLong("1-100000".into())));
        assert_eq!(parse("1-9999,20000-29999"), Err(SeedsError::TooMany(19999)));
    }
}
