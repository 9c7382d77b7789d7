//! Quantities written as strings with units, the way engineers say them:
//! `"400Gbps"`, `"2us"`, `"256KiB"`, `"48pkt"`.
//!
//! Each type parses strictly (a clear message naming the accepted units) and
//! prints back in the largest unit that keeps the value exact, so a generated
//! file reads like a hand-written one.
//!
//! Spaces around the number and unit are allowed (`"1 us"` is `"1us"`).
//! Sizes take both binary and decimal units, exactly: `KiB`, `MiB`, `GiB`
//! are powers of 2 (1MiB = 1,048,576 bytes, how switch buffers are quoted),
//! `KB`/`kB`, `MB`, `GB` powers of 10 (1MB = 1,000,000 bytes, about 0.95MiB).
//! A size prints in the unit family it is exact in, so `1MB` stays `1MB`.
//! Units are case-sensitive (`mb` and `Mb` are refused, naming `MB` and
//! `MiB`), since `Mb` could be megabits.

use std::fmt;

use serde::{Serialize, Serializer};

/// Link or NIC rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bandwidth(pub u64);

/// A span of time in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub u64);

/// A buffer size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

/// A queue depth, either in packets (what BMv2 reports) or in bytes (what
/// Tofino reports, in cells). The controller converts for the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueueDepth {
    Packets(u64),
    Bytes(u64),
}

/// Largest bandwidth accepted: far above any NIC or port, small enough that
/// sums over thousands of links cannot overflow a u64.
pub const MAX_BANDWIDTH: u64 = 100_000_000_000_000; // 100 Tbps
/// Largest duration accepted (one hour): anything larger is a typo.
pub const MAX_DURATION: u64 = 3_600_000_000_000;
/// Largest buffer accepted (64 GiB).
pub const MAX_BYTES: u64 = 64 << 30;
/// Largest queue depth in packets accepted.
pub const MAX_PACKETS: u64 = 1 << 24;

const BANDWIDTH_UNITS: &[(&str, u64)] =
    &[("Tbps", 1_000_000_000_000), ("Gbps", 1_000_000_000), ("Mbps", 1_000_000), ("Kbps", 1_000), ("bps", 1)];
const DURATION_UNITS: &[(&str, u64)] =
    &[("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000), ("µs", 1_000), ("ns", 1)];
const BYTE_UNITS: &[(&str, u64)] = &[
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("KB", 1_000),
    ("kB", 1_000),
    ("B", 1),
];
const PACKET_UNITS: &[(&str, u64)] = &[("packets", 1), ("packet", 1), ("pkts", 1), ("pkt", 1)];

/// Why a quantity did not parse. The message is complete on its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(pub String);

/// Splits `"2.5 Gbps"` into the number text and the unit text.
fn split(text: &str) -> (&str, &str) {
    let t = text.trim();
    let end = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(t.len());
    (&t[..end], t[end..].trim())
}

/// Parses a decimal number times a unit factor into an exact integer.
/// Fractions that do not land on a whole base unit are rejected rather than
/// silently rounded.
fn scaled(number: &str, factor: u64) -> Option<u64> {
    let number = number.replace('_', "");
    let (int, frac) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number.as_str(), ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let int: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut value = int.checked_mul(factor)?;
    if !frac.is_empty() {
        if frac.len() > 18 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let den = 10u128.pow(u32::try_from(frac.len()).ok()?);
        let num = u128::from(frac.parse::<u64>().ok()?) * u128::from(factor);
        if num % den != 0 {
            return None;
        }
        value = value.checked_add(u64::try_from(num / den).ok()?)?;
    }
    Some(value)
}

fn parse_with(
    text: &str,
    units: &[(&str, u64)],
    what: &str,
    example: &str,
    max: u64,
    max_text: &str,
) -> Result<u64, UnitError> {
    if text.trim_start().starts_with('-') {
        return Err(UnitError(format!("{what} \"{text}\" must not be negative")));
    }
    let (number, unit) = split(text);
    let accepted = || units.iter().map(|(u, _)| *u).collect::<Vec<_>>().join(", ");
    let Some(&(_, factor)) = units.iter().find(|(u, _)| *u == unit) else {
        return Err(UnitError(if unit.is_empty() {
            format!("{what} \"{text}\" has no unit; write it like \"{example}\" (units: {})", accepted())
        } else {
            let close: Vec<&str> = units.iter().map(|(u, _)| *u).filter(|u| unit_folds_to(unit, u)).collect();
            let hint = match close.as_slice() {
                [] => String::new(),
                some => format!("did you mean {}? Otherwise ", some.join(" or ")),
            };
            let sizes = if std::ptr::eq(units, BYTE_UNITS) { SIZE_NOTE } else { "" };
            format!("{what} \"{text}\" has unknown unit \"{unit}\"; {hint}use one of {}{sizes}", accepted())
        }));
    };
    let value = scaled(number, factor).ok_or_else(|| {
        UnitError(format!(
            "{what} \"{text}\" is not a non-negative number with unit; write it like \"{example}\""
        ))
    })?;
    if value > max {
        return Err(UnitError(format!("{what} \"{text}\" is larger than the maximum of {max_text}")));
    }
    Ok(value)
}

/// What the size units mean, for messages.
const SIZE_NOTE: &str =
    " (KiB, MiB, GiB are powers of 2: 1MiB = 1048576 bytes; KB, MB, GB powers of 10: 1MB = 1000000 bytes)";

/// `unit` differs from `known` only in case, or is `known` without its `i`
/// (`mb` → `MB`, `MiB`; `mib` → `MiB`).
fn unit_folds_to(unit: &str, known: &str) -> bool {
    let fold = |s: &str| s.to_ascii_lowercase().replace('i', "");
    unit != known && fold(unit) == fold(known) && !known.starts_with('k')
}

/// Writes `value` in the largest unit that divides it exactly.
fn format_with(f: &mut fmt::Formatter<'_>, value: u64, units: &[(&str, u64)]) -> fmt::Result {
    for (unit, factor) in units {
        if *factor == 1 || (value != 0 && value.is_multiple_of(*factor)) {
            return write!(f, "{}{unit}", value / factor);
        }
    }
    write!(f, "{value}")
}

impl Bandwidth {
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        let v = parse_with(text, BANDWIDTH_UNITS, "bandwidth", "400Gbps", MAX_BANDWIDTH, "100Tbps")?;
        if v == 0 {
            return Err(UnitError(format!("bandwidth \"{text}\" must be greater than zero")));
        }
        Ok(Bandwidth(v))
    }
    pub const fn gbps(g: u64) -> Self {
        Bandwidth(g * 1_000_000_000)
    }
    /// Bits per second, at least 1 (a rate, never zero).
    pub const fn from_bps(bps: u64) -> Self {
        Bandwidth(if bps == 0 { 1 } else { bps })
    }
    pub fn bps(self) -> u64 {
        self.0
    }
}

impl Duration {
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        parse_with(text, DURATION_UNITS, "duration", "2us", MAX_DURATION, "1 hour").map(Duration)
    }
    pub const fn us(us: u64) -> Self {
        Duration(us * 1_000)
    }
    pub fn ns(self) -> u64 {
        self.0
    }
}

impl ByteSize {
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        parse_with(text, BYTE_UNITS, "size", "256KiB", MAX_BYTES, "64GiB").map(ByteSize)
    }
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl QueueDepth {
    /// `"48pkt"` (packets) or `"64KiB"` (bytes).
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        let (_, unit) = split(text);
        if PACKET_UNITS.iter().any(|(u, _)| *u == unit) {
            parse_with(text, PACKET_UNITS, "queue depth", "48pkt", MAX_PACKETS, "16777216 packets")
                .map(QueueDepth::Packets)
        } else if BYTE_UNITS.iter().any(|(u, _)| *u == unit) {
            ByteSize::parse(text).map(|b| QueueDepth::Bytes(b.0))
        } else {
            Err(UnitError(format!(
                "queue depth \"{text}\" needs a unit: packets (\"48pkt\") or bytes (\"64KiB\")"
            )))
        }
    }

    /// True when both depths are in the same unit, so they can be compared.
    pub fn same_unit(self, other: QueueDepth) -> bool {
        matches!(
            (self, other),
            (QueueDepth::Packets(_), QueueDepth::Packets(_)) | (QueueDepth::Bytes(_), QueueDepth::Bytes(_))
        )
    }

    pub fn value(self) -> u64 {
        match self {
            QueueDepth::Packets(v) | QueueDepth::Bytes(v) => v,
        }
    }
}

impl fmt::Display for Bandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        format_with(f, self.0, BANDWIDTH_UNITS)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0us");
        }
        format_with(f, self.0, &[("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000), ("ns", 1)])
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Binary units first, then decimal ones: a size reads the way it
        // was written (`1MB`, not `1000000B`).
        let units = [
            ("GiB", 1 << 30),
            ("MiB", 1 << 20),
            ("KiB", 1 << 10),
            ("GB", 1_000_000_000),
            ("MB", 1_000_000),
            ("KB", 1_000),
            ("B", 1),
        ];
        format_with(f, self.0, &units)
    }
}

impl fmt::Display for QueueDepth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueDepth::Packets(p) => write!(f, "{p}pkt"),
            QueueDepth::Bytes(b) => ByteSize(*b).fmt(f),
        }
    }
}

macro_rules! serialize_as_display {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    )*};
}
serialize_as_display!(Bandwidth, Duration, ByteSize, QueueDepth);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidths() {
        assert_eq!(Bandwidth::parse("400Gbps").unwrap().bps(), 400_000_000_000);
        assert_eq!(Bandwidth::parse("2.5Gbps").unwrap().bps(), 2_500_000_000);
        assert_eq!(Bandwidth::parse(" 10 Mbps ").unwrap().bps(), 10_000_000);
        assert_eq!(Bandwidth::parse("1_000bps").unwrap().bps(), 1_000);
        assert_eq!(Bandwidth::gbps(400).to_string(), "400Gbps");
        assert_eq!(Bandwidth(2_500_000_000).to_string(), "2500Mbps");
    }

    #[test]
    fn bandwidth_errors_say_what_to_write() {
        let e = Bandwidth::parse("400").unwrap_err().0;
        assert!(e.contains("has no unit") && e.contains("400Gbps"), "{e}");
        let e = Bandwidth::parse("400G").unwrap_err().0;
        assert!(e.contains("unknown unit \"G\"") && e.contains("Gbps"), "{e}");
        let e = Bandwidth::parse("0Gbps").unwrap_err().0;
        assert!(e.contains("greater than zero"), "{e}");
        let e = Bandwidth::parse("-5Gbps").unwrap_err().0;
        assert!(e.contains("must not be negative"), "{e}");
        let e = Bandwidth::parse("1000Tbps").unwrap_err().0;
        assert!(e.contains("maximum"), "{e}");
        let e = Bandwidth::parse("99999999999999999999999Gbps").unwrap_err().0;
        assert!(e.contains("not a non-negative number"), "{e}");
        assert!(Bandwidth::parse("1.5bps").is_err(), "fractions of the base unit are not exact");
        assert!(Bandwidth::parse("Gbps").is_err());
        assert!(Bandwidth::parse("1.2.3Gbps").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(Duration::parse("2us").unwrap().ns(), 2_000);
        assert_eq!(Duration::parse("2µs").unwrap().ns(), 2_000);
        assert_eq!(Duration::parse("0.5ms").unwrap().ns(), 500_000);
        assert_eq!(Duration::parse("0ns").unwrap().ns(), 0);
        assert_eq!(Duration(500_000).to_string(), "500us");
        assert_eq!(Duration(0).to_string(), "0us");
        assert!(Duration::parse("2 hours").is_err());
        assert!(Duration::parse("5000s").unwrap_err().0.contains("maximum"));
    }

    #[test]
    fn sizes_and_depths() {
        assert_eq!(ByteSize::parse("256KiB").unwrap().bytes(), 262_144);
        assert_eq!(ByteSize::parse("1.5MB").unwrap().bytes(), 1_500_000);
        assert_eq!(ByteSize(262_144).to_string(), "256KiB");
        assert_eq!(QueueDepth::parse("48pkt").unwrap(), QueueDepth::Packets(48));
        assert_eq!(QueueDepth::parse("48 packets").unwrap(), QueueDepth::Packets(48));
        assert_eq!(QueueDepth::parse("64KiB").unwrap(), QueueDepth::Bytes(65_536));
        assert!(QueueDepth::parse("48").unwrap_err().0.contains("packets (\"48pkt\") or bytes"));
        assert!(ByteSize::parse("10GB").is_ok());
        assert!(ByteSize::parse("100GiB").unwrap_err().0.contains("maximum"));
    }

    #[test]
    fn display_round_trips() {
        for text in ["400Gbps", "25Gbps", "1500Mbps", "7bps"] {
            assert_eq!(Bandwidth::parse(text).unwrap().to_string(), text);
        }
        for text in ["2us", "1ms", "1500ns", "3s"] {
            assert_eq!(Duration::parse(text).unwrap().to_string(), text);
        }
        for text in ["256KiB", "12MiB", "100B", "1MB", "2MB", "1500KB", "3GB"] {
            assert_eq!(ByteSize::parse(text).unwrap().to_string(), text);
        }
    }

    /// The units issue 17 asked about: spaces are fine, MB and MiB are
    /// both exact and different, and a unit in the wrong case is refused
    /// with what was meant.
    #[test]
    fn spaces_and_decimal_versus_binary_sizes() {
        assert_eq!(Duration::parse("1 us").unwrap(), Duration::parse("1us").unwrap());
        assert_eq!(ByteSize::parse("1MB").unwrap().bytes(), 1_000_000);
        assert_eq!(ByteSize::parse("2MB").unwrap().bytes(), 2_000_000);
        assert_eq!(ByteSize::parse("1MiB").unwrap().bytes(), 1_048_576);
        assert_eq!(ByteSize::parse(" 1 MiB ").unwrap().bytes(), 1_048_576);
        let e = ByteSize::parse("1mb").unwrap_err().0;
        assert!(e.contains("did you mean MiB or MB?") && e.contains("1MB = 1000000 bytes"), "{e}");
        let e = ByteSize::parse("1Mb").unwrap_err().0;
        assert!(e.contains("did you mean MiB or MB?"), "{e}");
        let e = Duration::parse("1 US").unwrap_err().0;
        assert!(e.contains("did you mean us?") && !e.contains("MiB"), "{e}");
        let e = Bandwidth::parse("1gbps").unwrap_err().0;
        assert!(e.contains("did you mean Gbps?"), "{e}");
    }
}
