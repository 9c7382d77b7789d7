//! The staged roll-out: watch first, then advise, then let the controller act.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How far the controller goes with what it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Sense and log what it would do; write nothing after the baseline.
    #[default]
    Observe,
    /// Also publish the recommended changes on the status API.
    Advise,
    /// Closed loop: write the changes to the switches.
    Act,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Observe, Mode::Advise, Mode::Act];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Observe => "observe",
            Mode::Advise => "advise",
            Mode::Act => "act",
        }
    }

    /// True when decisions are written to the switches.
    pub fn writes(self) -> bool {
        self == Mode::Act
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is none of [`Mode::ALL`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode \"{given}\"; expected one of observe, advise, act")]
pub struct UnknownMode {
    pub given: String,
}

impl FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(s: &str) -> Result<Self, UnknownMode> {
        Mode::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| UnknownMode { given: s.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for m in Mode::ALL {
            assert_eq!(m.as_str().parse::<Mode>(), Ok(m));
        }
        let e = "acting".parse::<Mode>().unwrap_err();
        assert_eq!(e, UnknownMode { given: "acting".into() });
        assert!(e.to_string().contains("\"acting\"; expected one of observe, advise, act"), "{e}");
        assert!(Mode::Act.writes() && !Mode::Advise.writes());
    }
}
